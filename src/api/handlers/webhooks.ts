import type { components, operations } from '../../../generated/openapi.ts';
import type { ConversationService, Event } from '../../conversations/conversation-service.ts';
import type { ConversationInfo, ConversationInfoService } from '../../conversations/conversation-info-service.ts';
import { principalOf, releaseRequestBody, respond, type OperationHandlers } from '../context.ts';

type PathParams = operations['ingestEvents']['parameters']['path'];
type Unrecognized = components['schemas']['Unrecognized'];

/**
 * Told about each accepted batch: the kinds of its events, what was stored, and (`accept-unknown`)
 * what the contract does not know of each event, for the metrics.
 */
export type IngestObserver = (
  kinds: string[],
  result: { stored: number; droppedDeltas: number },
  unrecognized: readonly (Unrecognized | null)[] | undefined,
  /** From the handler's start to the group's commit. */
  waitedMs: number,
) => void;

/** Handlers of the `webhooks` tag. */
export function webhookHandlers(
  conversations: ConversationService,
  conversationInfos: ConversationInfoService,
  observeIngest?: IngestObserver,
): OperationHandlers {
  return {
    ingestEvents(operation, ctx) {
      const { conversation_id } = operation.request.params as PathParams;
      const events = operation.request.requestBody as Event[];
      const kinds = events.map((event) => event.kind);
      const unrecognized = ctx.state.unrecognizedEvents;
      const started = performance.now();
      const ingested = conversations.ingest(principalOf(operation), conversation_id, events, unrecognized);
      // The batch took what it stores; it now waits for its group's commit without the parsed body
      // (nor this function's frame: an async function's would keep `events` until it returns).
      releaseRequestBody(operation, ctx);
      return ingested.then((result) => {
        observeIngest?.(kinds, result, unrecognized, performance.now() - started);
        respond<components['schemas']['Success']>(ctx, 200, { success: true });
      });
    },
    async receiveConversationInfo(operation, ctx) {
      const info = operation.request.requestBody as ConversationInfo;
      const { created, conversation } = await conversationInfos.receive(principalOf(operation), info);
      respond<components['schemas']['Conversation']>(ctx, created ? 201 : 200, conversation);
    },
  };
}
