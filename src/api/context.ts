import type { ParameterizedContext } from 'koa';
import type { Context as OperationContext } from 'openapi-backend';
import type { Principal } from '../identity/authenticator.ts';
import { UnauthenticatedError } from '../errors.ts';
import type { components } from '../../generated/openapi.ts';

type Unrecognized = components['schemas']['Unrecognized'];

/**
 * Koa's per-request state holds the exact bytes of a JSON body, for operations that verify a
 * signature over them, and what the access log and metrics say about the request. Nothing else lives there: each service call is its own unit of work and forks
 * its own EntityManager, and the caller comes from the operation's security results.
 */
export interface RequestState {
  rawBody?: Buffer;
  /** The same body as JSON text, as `readJsonBody` decoded it (no byte order mark). */
  bodyText?: string;
  /** Events in a webhook batch's body (null: not a JSON array), for the refusal ledger. */
  webhookEventCount?: number | null;
  /** The spec's operationId, once the request matched one. */
  operationId?: string;
  /** The authenticated caller's user id (never a credential), for the access log. */
  userId?: string;
  /** The organization the caller acts in (see `scopeToOrganization`), for the refusal ledger. */
  orgId?: string;
  /** `accept-unknown`: per event of an admitted webhook batch, what the contract does not know of it (see `admitsUnrecognizedEvents`). */
  unrecognizedEvents?: (Unrecognized | null)[];
}

export type KoaContext = ParameterizedContext<RequestState>;

/** An operation handler: its name is the spec's operationId; it sets `ctx.status` and `ctx.body`. */
export type OperationHandler = (operation: OperationContext, ctx: KoaContext) => Promise<void> | void;

export type OperationHandlers = Record<string, OperationHandler>;

/** The caller, as the operation's security handlers established it. */
export function principalOf(operation: OperationContext): Principal {
  const results = (operation.security ?? {}) as Record<string, unknown>;
  for (const scheme of ['AccessToken', 'APIKeyHeader']) {
    const result = results[scheme] as Principal | { error: unknown } | undefined;
    if (result && !('error' in result)) return result;
  }
  throw new UnauthenticatedError('Not authenticated');
}

/** The caller's user id when a credential was accepted; undefined for anonymous or refused calls. */
export function callerIdOf(operation: OperationContext): string | undefined {
  const results = (operation.security ?? {}) as Record<string, unknown>;
  for (const scheme of ['AccessToken', 'APIKeyHeader']) {
    const result = results[scheme] as Principal | { error: unknown } | undefined;
    if (result && typeof result === 'object' && 'userId' in result) return result.userId;
  }
  return undefined;
}

/** Sets a typed response: the body type comes from `generated/`, so it cannot drift from the spec. */
export function respond<T>(ctx: KoaContext, status: number, body: T): void {
  ctx.status = status;
  ctx.body = body;
}

/**
 * Lets go of the request body, parsed and raw, for a handler that has taken what it needs and then
 * waits (the webhook, for its group's commit): else each collection during the wait copies it.
 * Validation's own copies are already gone (the `preOperationHandler` of `contract-handlers.ts`).
 */
export function releaseRequestBody(operation: OperationContext, ctx: KoaContext): void {
  operation.request.body = undefined;
  operation.request.requestBody = undefined;
  ctx.state.rawBody = undefined;
  ctx.state.bodyText = undefined;
}

/** The request body exactly as received (for signature verification); empty when there was none. */
export function rawBodyOf(ctx: KoaContext): Buffer {
  return ctx.state.rawBody ?? Buffer.alloc(0);
}

/** The request body as JSON text (decoded, without a byte order mark): what to store. */
export function bodyTextOf(ctx: KoaContext): string {
  return ctx.state.bodyText ?? '';
}

/** A response whose body is already JSON, as text or its bytes (stored event payloads go out exactly as stored). */
export function respondWithJsonText(ctx: KoaContext, status: number, json: string | Buffer): void {
  ctx.status = status;
  ctx.type = 'application/json';
  ctx.body = json;
}

/** A request header's first value (names are lower-case, as Node gives them). */
export function headerOf(c: OperationContext, name: string): string | undefined {
  const value = c.request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}
