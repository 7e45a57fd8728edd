import { DomainError, HttpError, InvalidInputError, UnauthenticatedError, httpStatusOf } from '../errors.ts';
import { isDatabaseUnavailable } from '../db/errors.ts';
import type { Logger } from '../logger.ts';
import type { OutageLog } from '../observability/outage-log.ts';
import type { KoaContext } from './context.ts';
import { RequestValidationError, boundedInput } from './validation-errors.ts';

type ErrorBody = { detail: unknown };

/**
 * Renders any thrown error as the contract's error body; the one error renderer of the service. A
 * database outage is logged by `outage` (one line when it begins, one when it ends), not per request.
 */
export function renderError(error: unknown, ctx: KoaContext, log: Logger, outage?: OutageLog): void {
  let status: number;
  let body: ErrorBody;
  if (error instanceof RequestValidationError) {
    status = 422;
    body = { detail: error.detail };
  } else if (error instanceof InvalidInputError) {
    status = 422;
    body = { detail: [{ loc: error.loc, msg: error.message, type: error.type, input: boundedInput(error.input) }] };
  } else if (error instanceof DomainError) {
    status = httpStatusOf(error);
    body = { detail: error.message };
    if (error instanceof UnauthenticatedError) ctx.set('WWW-Authenticate', 'APIKey');
  } else if (error instanceof HttpError) {
    status = error.status;
    body = { detail: error.message };
    ctx.set(error.headers);
  } else if (isDatabaseUnavailable(error)) {
    status = 503;
    body = { detail: 'The database is unavailable; retry later' };
    ctx.set('Retry-After', '1');
    if (outage) outage.failed(error);
    else log.error({ err: error }, 'database unavailable');
  } else {
    status = 500;
    body = { detail: 'Internal server error' };
    log.error({ err: error }, 'unhandled error');
  }
  ctx.status = status;
  ctx.body = body;
}
