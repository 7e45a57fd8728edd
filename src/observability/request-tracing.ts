import { randomUUID } from 'node:crypto';
import type { ParameterizedContext } from 'koa';
import type { Logger } from '../logger.ts';
import { UNMATCHED_OPERATION, type Metrics } from './metrics.ts';
import { requestContext } from './request-context.ts';

/** What tracing reads of a request's state: the operation it matched and the caller's user id. */
export type TracedContext = ParameterizedContext<{ operationId?: string; userId?: string }>;

/** A caller's own X-Request-Id is kept (and logged) only if it looks like an id. */
const REQUEST_ID_PATTERN = /^[\w.:-]{1,128}$/;

/** A share-link or invitation token in a path is a capability: the access log keeps its first characters (the owner's `token_hint`). */
const SHARE_TOKEN = /((?:apsh|apin)_[A-Za-z0-9_-]{4})[A-Za-z0-9_-]*/g;
/** The operations whose path holds such a token; unmatched paths are masked too (a mistyped link). */
const SHARE_TOKEN_OPERATIONS: ReadonlySet<string | undefined> = new Set([undefined, UNMATCHED_OPERATION, 'getSharePage', 'getSharedConversation', 'listSharedEvents', 'acceptInvitation']);

/** `path` as the access log writes it: a share-link token cut to its hint (looked for only where one can be: not on the webhook's path). */
function loggedPath(path: string, operationId: string | undefined): string {
  return SHARE_TOKEN_OPERATIONS.has(operationId) ? path.replace(SHARE_TOKEN, '$1…') : path;
}

/**
 * Serves one request under its request id: `X-Request-Id` on the response (the caller's own when
 * it looks like an id, else a new UUID), the id on every log line written meanwhile, then one access
 * log line and the request's metrics. The access line names the caller by user id only; credentials
 * never reach it, nor share-link tokens (they are in paths).
 */
export async function traceRequest(
  ctx: TracedContext,
  deps: { logger: Logger; metrics: Metrics },
  serve: () => Promise<void>,
): Promise<void> {
  const started = process.hrtime.bigint();
  const offeredId = ctx.get('x-request-id');
  const requestId = REQUEST_ID_PATTERN.test(offeredId) ? offeredId : randomUUID();
  ctx.set('X-Request-Id', requestId);
  await requestContext.run({ requestId }, async () => {
    await serve();
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const operation = ctx.state.operationId ?? UNMATCHED_OPERATION;
    const status = ctx.status;
    deps.metrics.httpRequests.inc({ operation, method: ctx.method, status: String(status) });
    deps.metrics.httpDuration.observe({ operation }, seconds);
    if (status === 422) {
      const detail = (ctx.body as { detail?: unknown } | undefined)?.detail;
      if (Array.isArray(detail)) {
        for (const problem of detail as { type?: unknown }[]) {
          deps.metrics.validationErrors.inc({ operation, type: typeof problem.type === 'string' ? problem.type : 'unknown' });
        }
      }
    }
    deps.logger.info(
      {
        method: ctx.method,
        path: loggedPath(ctx.path, ctx.state.operationId),
        operationId: ctx.state.operationId,
        status,
        ms: Math.round(seconds * 1e4) / 10,
        userId: ctx.state.userId,
      },
      'request',
    );
  });
}
