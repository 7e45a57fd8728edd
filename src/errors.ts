/**
 * Domain errors. Services throw these; `httpStatusOf` is the one place that maps them to HTTP.
 * Their messages are written for the API caller and end up in `{"detail": ...}`.
 */
export class DomainError extends Error {
  override name = 'DomainError';
}

/** No credential, or one we do not know (or that was revoked). */
export class UnauthenticatedError extends DomainError {
  override name = 'UnauthenticatedError';
}

/** A known caller without the right to do this. */
export class ForbiddenError extends DomainError {
  override name = 'ForbiddenError';
}

export class NotFoundError extends DomainError {
  override name = 'NotFoundError';
}

export class ConflictError extends DomainError {
  override name = 'ConflictError';
}

/** Rules the schema cannot express (for example a value that is blank once trimmed). */
export class InvalidInputError extends DomainError {
  override name = 'InvalidInputError';
  constructor(
    message: string,
    readonly loc: (string | number)[],
    readonly type: string,
    readonly input?: unknown,
  ) {
    super(message);
  }
}

/** A dependency (database, payment provider) cannot be reached; the caller should retry. */
export class UnavailableError extends DomainError {
  override name = 'UnavailableError';
}

/** A signed request (a payment provider's webhook) whose signature is missing, wrong or stale. */
export class InvalidSignatureError extends DomainError {
  override name = 'InvalidSignatureError';
}

/** The caller has too many of something at once (for example live streams); retry later. */
export class TooManyRequestsError extends DomainError {
  override name = 'TooManyRequestsError';
}

const STATUS_BY_ERROR: ReadonlyArray<[new (...args: never[]) => DomainError, number]> = [
  [UnauthenticatedError, 401],
  [ForbiddenError, 403],
  [NotFoundError, 404],
  [ConflictError, 409],
  [InvalidInputError, 422],
  [TooManyRequestsError, 429],
  [UnavailableError, 503],
  [InvalidSignatureError, 400],
];

/** The HTTP status of a domain error. */
export function httpStatusOf(error: DomainError): number {
  for (const [type, status] of STATUS_BY_ERROR) {
    if (error instanceof type) return status;
  }
  return 500;
}

/** Protocol-level failures (routing, media type, size, a missing metrics token) that happen before any domain logic. */
export class HttpError extends Error {
  override name = 'HttpError';
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}
