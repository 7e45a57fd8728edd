import type { Logger } from '../logger.ts';
import type { RefusalService } from '../refusals/refusal-service.ts';
import { BATCH_TOO_LARGE, refusalOf, type RefusalReason } from '../refusals/refusal.ts';
import type { KoaContext } from './context.ts';
import { BatchTooLargeError } from './request-body.ts';

const WEBHOOK_PATH = /^\/api\/v1\/webhooks\/events\/([^/]*)$/;

/** Longest conversation id (as sent) the ledger keeps. */
const MAX_CONVERSATION_ID_CHARS = 300;

/** Told about each refusal the ledger counted (metrics). */
export type RefusalObserver = (refusal: RefusalReason) => void;

/**
 * After the error renderer: a webhook batch (`ingestEvents`) of an authenticated caller answered 413
 * or 422 goes into the refusal ledger, with one warning naming the conversation and the reason (never
 * the payload). Accepted batches never get here. A ledger that cannot be written is logged; the
 * refusal still goes out as it was.
 */
export function refusalRecorder(refusals: RefusalService, log: Logger, observe: RefusalObserver) {
  return async (ctx: KoaContext, error: unknown): Promise<void> => {
    const { status } = ctx;
    if (ctx.state.operationId !== 'ingestEvents' || (status !== 413 && status !== 422) || !ctx.state.orgId || !ctx.state.userId) return;
    const match = WEBHOOK_PATH.exec(ctx.path);
    const conversationId = safeDecode(match?.[1] ?? '').slice(0, MAX_CONVERSATION_ID_CHARS);
    const refusal = refusalOf(status, (ctx.body as { detail?: unknown } | undefined)?.detail, error instanceof BatchTooLargeError ? BATCH_TOO_LARGE : undefined);
    const body = ctx.state.rawBody;
    observe(refusal);
    try {
      const recorded = await refusals.record({
        ownerId: ctx.state.orgId,
        senderId: ctx.state.userId,
        conversationId,
        refusal,
        body,
        announcedBytes: ctx.request.length,
        eventCount: ctx.state.webhookEventCount ?? null,
      });
      log.warn(
        { conversationId, userId: ctx.state.userId, status, reason: refusal.reason, refusedDeliveryId: recorded.id, attempts: recorded.attempts },
        `webhook batch refused (${status} ${refusal.reason}) for conversation ${conversationId}`,
      );
    } catch (recordError) {
      log.error({ err: recordError, conversationId, status, reason: refusal.reason }, 'webhook batch refused; the refusal ledger could not record it');
    }
  };
}

function safeDecode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

