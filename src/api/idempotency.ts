import { createHash } from 'node:crypto';
import type { OpenAPIBackend } from 'openapi-backend';
import { HttpError, InvalidInputError } from '../errors.ts';
import type { IdempotencyService, StoredResponse } from '../idempotency/idempotency-service.ts';
import { principalOf, rawBodyOf, type KoaContext, type OperationHandler, type OperationHandlers } from './context.ts';

/** The request header, and the response header that marks an answer given again. */
export const IDEMPOTENCY_KEY_HEADER = 'Idempotency-Key';
export const REPLAYED_HEADER = 'Idempotent-Replayed';

/** Response headers kept with the first response (the body's type, where the created thing is). */
const KEPT_HEADERS = ['content-type', 'location'];

/** The operations whose parameters include the `Idempotency-Key` header (`#/components/parameters/IdempotencyKey`). */
export function idempotentOperationIds(api: OpenAPIBackend): Set<string> {
  const ids = new Set<string>();
  for (const operation of api.getOperations()) {
    const parameters = (operation.parameters ?? []) as { in?: string; name?: string }[];
    if (parameters.some((p) => p.in === 'header' && p.name?.toLowerCase() === 'idempotency-key')) ids.add(operation.operationId!);
  }
  return ids;
}

/**
 * Wraps the handlers of the operations that declare `Idempotency-Key`: with a key, the same request
 * (operation, path and body bytes) within 24 h gets the first response again, marked
 * `Idempotent-Replayed: true`; another request with the key → 422 naming the header; the same one
 * while the first is in flight → 409 with Retry-After. Only a 2xx is kept: after a failure the key is free.
 */
export function withIdempotency(handlers: OperationHandlers, operationIds: Set<string>, service: IdempotencyService): OperationHandlers {
  const wrapped: OperationHandlers = { ...handlers };
  for (const operationId of operationIds) {
    const handler = handlers[operationId];
    if (handler) wrapped[operationId] = idempotent(handler, operationId, service);
  }
  return wrapped;
}

function idempotent(handler: OperationHandler, operationId: string, service: IdempotencyService): OperationHandler {
  return async (operation, ctx) => {
    const key = keyOf(ctx.get(IDEMPOTENCY_KEY_HEADER));
    if (key === undefined) return handler(operation, ctx);
    // A key is the person's: another member of the organization must never get a response made for
    // someone else (it may hold a key's secret). A shared organization is part of the request, so the same
    // key sent in another organization is "another request" (422), not a replay; in the personal one the
    // hash is what it was before organizations, so records kept from then still match.
    const { userId: ownerId, orgId } = principalOf(operation);
    const requestHash = createHash('sha256')
      .update(`${orgId === ownerId ? '' : `${orgId} `}${ctx.method} ${ctx.url}\n`)
      .update(rawBodyOf(ctx))
      .digest();
    const outcome = await service.begin(ownerId, key, operationId, requestHash);
    if (outcome.kind === 'replay') return replay(ctx, outcome.response);
    if (outcome.kind === 'other-request') {
      throw new InvalidInputError(
        `This ${IDEMPOTENCY_KEY_HEADER} was already used with another request (a different body, path or operation) in the last 24 hours; use a new key for a new request`,
        ['header', IDEMPOTENCY_KEY_HEADER.toLowerCase()],
        'idempotency_key_reused',
        key,
      );
    }
    if (outcome.kind === 'in-flight') {
      throw new HttpError(409, `A request with this ${IDEMPOTENCY_KEY_HEADER} is still being processed; retry after it has been answered`, { 'Retry-After': '1' });
    }
    try {
      await handler(operation, ctx);
    } catch (error) {
      await service.release(ownerId, key);
      throw error;
    }
    if (ctx.status >= 200 && ctx.status < 300) await service.complete(ownerId, key, responseOf(ctx));
    else await service.release(ownerId, key);
  };
}

/** The key as sent: a structured-field String (`"abc"`, as the draft writes it) or the bare text. */
function keyOf(header: string): string | undefined {
  if (!header) return undefined;
  return header.length >= 2 && header.startsWith('"') && header.endsWith('"') ? header.slice(1, -1) : header;
}

function responseOf(ctx: KoaContext): StoredResponse {
  const headers: Record<string, string> = {};
  for (const name of KEPT_HEADERS) {
    const value = ctx.response.get(name);
    if (value) headers[name] = value;
  }
  const body = ctx.body;
  const bytes = body === undefined || body === null ? Buffer.alloc(0) : Buffer.isBuffer(body) ? body : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  return { status: ctx.status, headers, body: bytes };
}

function replay(ctx: KoaContext, response: StoredResponse): void {
  ctx.status = response.status;
  ctx.set(response.headers);
  ctx.set(REPLAYED_HEADER, 'true');
  if (response.body.length > 0) ctx.body = response.body;
}
