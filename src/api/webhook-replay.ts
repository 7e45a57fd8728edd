import type { OpenAPIBackend } from 'openapi-backend';
import type { components } from '../../generated/openapi.ts';
import type { ConversationService, Event } from '../conversations/conversation-service.ts';
import type { RefusalService } from '../refusals/refusal-service.ts';
import { BATCH_TOO_LARGE, refusalOf } from '../refusals/refusal.ts';
import { HttpError } from '../errors.ts';
import { decodeJsonBody } from './json-body.ts';
import { BatchTooLargeError, checkWebhookBatchSize, webhookReadLimit, type BodyLimits } from './request-body.ts';
import { RequestValidationError, requestValidationError } from './validation-errors.ts';
import { unrecognizedEventsOf, type EventCompatibility } from './event-compatibility.ts';

/** Stores a kept webhook body for its owner, or throws the refusal it gets now (413, 422, 403). */
export type WebhookReplayer = (ownerId: string, conversationId: string, body: Buffer) => Promise<{ stored: number }>;

/**
 * Replays one refused delivery: stored → `replayed_at` is set; refused again (413, 422) → the ledger
 * says why as of now, and that refusal is thrown for the caller.
 */
export async function replayRefusedDelivery(
  refusals: RefusalService,
  replay: WebhookReplayer,
  id: number,
): Promise<components['schemas']['RefusedDeliveryReplay']> {
  const kept = await refusals.replayable(id);
  let stored: number;
  try {
    ({ stored } = await replay(kept.ownerId, kept.conversationId, kept.body));
  } catch (error) {
    if (error instanceof RequestValidationError) await refusals.refusedAgain(id, refusalOf(422, error.detail));
    else if (error instanceof HttpError && error.status === 413) {
      await refusals.refusedAgain(id, refusalOf(413, error.message, error instanceof BatchTooLargeError ? BATCH_TOO_LARGE : undefined));
    }
    throw error;
  }
  return { stored_events: stored, delivery: await refusals.replayed(id) };
}

/**
 * A refused batch sent through the webhook's rules of now: its size limits, the `ingestEvents`
 * validator of the contract, the compatibility policy of now and the same ingest,
 * idempotent by event id.
 */
export function webhookReplayer(
  api: OpenAPIBackend,
  conversations: ConversationService,
  limits: BodyLimits & { maxValidationErrors: number },
  eventCompatibility: EventCompatibility | undefined,
): WebhookReplayer {
  return async (ownerId, conversationId, raw) => {
    if (raw.length > webhookReadLimit(limits)) throw new HttpError(413, `Request body exceeds the limit of ${webhookReadLimit(limits)} bytes`);
    const body = decodeJsonBody(raw);
    checkWebhookBatchSize(body, limits);
    const request = {
      method: 'post',
      path: `/api/v1/webhooks/events/${encodeURIComponent(conversationId)}`,
      headers: { 'content-type': 'application/json' },
      query: {},
      body: body.value,
    };
    const validation = api.validator.validateRequest(request, 'ingestEvents');
    // Under `accept-unknown`, what the contract does not know is stored flagged, as the webhook does.
    const unrecognized = validation.valid || !eventCompatibility ? undefined : unrecognizedEventsOf(eventCompatibility, body.value, validation.errors ?? []);
    if (!validation.valid && !unrecognized) {
      const validated = { requestBody: body.value, path: { conversation_id: conversationId }, query: {}, header: request.headers };
      throw requestValidationError(api, 'ingestEvents', validation.errors ?? [], validated, limits.maxValidationErrors);
    }
    return conversations.ingest({ orgId: ownerId }, conversationId, body.value as Event[], unrecognized);
  };
}
