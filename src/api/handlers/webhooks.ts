import type { components, operations } from '../../../generated/openapi.ts';
import type { ConversationService, Event } from '../../conversations/conversation-service.ts';
import type { ConversationInfo, ConversationInfoService } from '../../conversations/conversation-info-service.ts';
import { principalOf, releaseRequestBody, respond, type OperationHandlers } from '../context.ts';

type PathParams = operations['ingestEvents']['parameters']['path'];
type Unrecognized = components['schemas']['Unrecognized'];

/** What an accepted batch stored: the kinds of its events, the counts, and (`accept-unknown`) what the contract does not know of each event. */
export interface StoredBatch {
  kinds: string[];
  result: { stored: number; droppedDeltas: number };
  unrecognized: readonly (Unrecognized | null)[] | undefined;
}

/** Told when a batch goes into the ingest and when it leaves it (`stored`, or undefined when refused): for the metrics and the yield. */
export interface IngestObserver {
  entered(): void;
  left(stored?: StoredBatch): void;
}

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
      observeIngest?.entered();
      let ingested: ReturnType<ConversationService['ingest']>;
      try {
        ingested = conversations.ingest(principalOf(operation), conversation_id, events, unrecognized);
      } catch (error) {
        observeIngest?.left();
        throw error;
      }
      // The batch took what it stores; it now waits for its group's commit without the parsed body
      // (nor this function's frame: an async function's would keep `events` until it returns).
      releaseRequestBody(operation, ctx);
      return ingested.then(
        (result) => {
          observeIngest?.left({ kinds, result, unrecognized });
          respond<components['schemas']['Success']>(ctx, 200, { success: true });
        },
        (error: unknown) => {
          observeIngest?.left();
          throw error;
        },
      );
    },
    async receiveConversationInfo(operation, ctx) {
      const info = operation.request.requestBody as ConversationInfo;
      const { created, conversation } = await conversationInfos.receive(principalOf(operation), info);
      respond<components['schemas']['Conversation']>(ctx, created ? 201 : 200, conversation);
    },
  };
}
