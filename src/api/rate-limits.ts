import type { Context as OperationContext, OpenAPIBackend } from 'openapi-backend';
import { RATE_LIMIT_CLASSES, type RateLimitClass } from '../config.ts';
import { HttpError } from '../errors.ts';
import type { RateLimiter } from '../rate-limits/rate-limiter.ts';
import type { KoaContext } from './context.ts';

/** Each operation's `x-rate-limit-class`; an operation without a known one stops the start (the spec is wrong). */
export function rateLimitClasses(api: OpenAPIBackend): Map<string, RateLimitClass> {
  const classes = new Map<string, RateLimitClass>();
  for (const operation of api.getOperations()) {
    const declared = (operation as { 'x-rate-limit-class'?: string })['x-rate-limit-class'];
    if (!RATE_LIMIT_CLASSES.includes(declared as RateLimitClass)) {
      throw new Error(`${operation.operationId}: x-rate-limit-class must be one of ${RATE_LIMIT_CLASSES.join(', ')}, got ${String(declared)}`);
    }
    classes.set(operation.operationId!, declared as RateLimitClass);
  }
  return classes;
}

/** Throws the 429 when the caller is over its operation's limit: per credential, else per client IP. */
export function enforceRateLimit(limiter: RateLimiter, limitClass: RateLimitClass, c: OperationContext, ctx: KoaContext): void {
  if (!limiter.limits(limitClass)) return;
  const refusal = limiter.check(limitClass, rateLimitKeyOf(c, ctx));
  if (!refusal) return;
  throw new HttpError(429, `Too many ${limitClass} requests for this credential; retry after ${refusal.retryAfterSeconds} s`, refusal.headers);
}

/** The credential that was accepted (an access token, a session key, the one behind a stream ticket), else the client's address. */
function rateLimitKeyOf(c: OperationContext, ctx: KoaContext): string {
  for (const result of Object.values(c.security ?? {})) {
    if (!result || typeof result !== 'object') continue;
    if ('credentialId' in result) return (result as { credentialId: string }).credentialId;
    if ('principal' in result) return (result as { principal: { credentialId: string } }).principal.credentialId;
  }
  return `ip:${ctx.ip}`;
}
