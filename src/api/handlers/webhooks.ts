import type { components, operations } from '../../../generated/openapi.ts';
import type { ConversationService, Event } from '../../conversations/conversation-service.ts';
import { principalOf, respond, type OperationHandlers } from '../context.ts';

type PathParams = operations['ingestEvents']['parameters']['path'];

/** Told about each accepted batch: the kinds of its events and what was stored (metrics). */
export type IngestObserver = (kinds: string[], result: { stored: number; droppedDeltas: number }) => void;

/** Handlers of the `webhooks` tag. */
export function webhookHandlers(conversations: ConversationService, observeIngest?: IngestObserver): OperationHandlers {
  return {
    async ingestEvents(operation, ctx) {
      const { conversation_id } = operation.request.params as PathParams;
      const events = operation.request.requestBody as Event[];
      const result = await conversations.ingest(principalOf(operation), conversation_id, events);
      observeIngest?.(
        events.map((event) => event.kind),
        result,
      );
      respond<components['schemas']['Success']>(ctx, 200, { success: true });
    },
  };
}
