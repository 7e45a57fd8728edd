import type { Context as OperationContext } from 'openapi-backend';
import type { OperationHandlers } from './context.ts';
import { isSecretProperty, RequestValidationError, type ValidationError } from './validation-errors.ts';

/**
 * PostgreSQL text and `jsonb` cannot hold `\u0000`, and a lone UTF-16 surrogate (`\ud800`) has no
 * UTF-8 form: such a string would reach the database and come back as a 500. Every operation
 * therefore refuses them with a 422 naming the field (`type: string_unicode`), after the schema
 * validation and before its handler, in the body, the path and the query alike. Operations that store
 * their body as received, as JSON text (`x-lossless-body: true` in the spec: the event webhook),
 * are exempt for the body only.
 */
export const STRING_UNICODE_TYPE = 'string_unicode';
const MESSAGE = 'String should contain neither NUL (\\u0000) nor unpaired surrogates';

/** `\u0000`, a high surrogate not followed by a low one, or a low surrogate not preceded by a high one. */
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

export function isStorableString(value: string): boolean {
  return !UNSTORABLE.test(value);
}

const MAX_REPORTED = 20;

/** Every string (and object key) under `value` that cannot be stored, as 422 entries under `loc`. */
export function unstorableStrings(value: unknown, loc: (string | number)[], found: ValidationError[] = [], depth = 0): ValidationError[] {
  if (found.length >= MAX_REPORTED || depth > 2000) return found;
  if (typeof value === 'string') {
    if (!isStorableString(value)) {
      const key = loc[loc.length - 1];
      const input = typeof key === 'string' && isSecretProperty(key, value) ? '[redacted]' : value.length > 200 ? `${value.slice(0, 200)}…` : value;
      found.push({ loc, msg: MESSAGE, type: STRING_UNICODE_TYPE, input });
    }
  } else if (Array.isArray(value)) {
    value.forEach((item, index) => unstorableStrings(item, [...loc, index], found, depth + 1));
  } else if (value && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    for (const [key, item] of Object.entries(value)) {
      if (!isStorableString(key)) {
        found.push({ loc: [...loc, key], msg: `Key: ${MESSAGE}`, type: STRING_UNICODE_TYPE });
        continue;
      }
      unstorableStrings(item, [...loc, key], found, depth + 1);
    }
  }
  return found;
}

/** Throws the 422 when the operation's validated input holds a string that cannot be stored. */
export function checkStorableStrings(c: OperationContext): void {
  const lossless = (c.operation as { 'x-lossless-body'?: boolean })['x-lossless-body'] === true;
  const found: ValidationError[] = [];
  unstorableStrings(c.request.params, ['path'], found);
  unstorableStrings(c.request.query, ['query'], found);
  if (!lossless) unstorableStrings(c.request.requestBody, ['body'], found);
  if (found.length > 0) throw new RequestValidationError(found);
}

/** The handlers, each preceded by `checkStorableStrings`. */
export function withStorableStrings(handlers: OperationHandlers): OperationHandlers {
  return Object.fromEntries(
    Object.entries(handlers).map(([operationId, handler]) => [
      operationId,
      (c: OperationContext, ctx: Parameters<typeof handler>[1]) => {
        checkStorableStrings(c);
        return handler(c, ctx);
      },
    ]),
  );
}

/**
 * A request path whose percent-encoding does not decode to UTF-8 (`%FF`, `%ED%A0%80`) names no
 * resource: a 422 on the path, checked before routing (the router would throw a URIError, a 500).
 */
export function checkPathEncoding(path: string): void {
  try {
    decodeURIComponent(path);
  } catch {
    throw new RequestValidationError([
      { loc: ['path'], msg: 'Invalid percent-encoding in the path', type: 'value_error', input: path.length > 200 ? `${path.slice(0, 200)}…` : path },
    ]);
  }
}
