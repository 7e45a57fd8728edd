import type { components, operations } from '../../../generated/openapi.ts';
import type { ConversationService, Event } from '../../conversations/conversation-service.ts';
import { principalOf, respond, type OperationHandlers } from '../context.ts';

type PathParams = operations['ingestEvents']['parameters']['path'];

/** Handlers of the `webhooks` tag. */
export function webhookHandlers(conversations: ConversationService): OperationHandlers {
  return {
    async ingestEvents(operation, ctx) {
      const { conversation_id } = operation.request.params as PathParams;
      await conversations.ingest(principalOf(operation), conversation_id, operation.request.requestBody as Event[]);
      respond<components['schemas']['Success']>(ctx, 200, { success: true });
    },
  };
}
