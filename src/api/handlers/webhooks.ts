import type { components, operations } from '../../../generated/openapi.ts';
import type { ConversationService, Event } from '../../conversations/conversation-service.ts';
import type { ConversationInfo, ConversationInfoService } from '../../conversations/conversation-info-service.ts';
import { principalOf, respond, type OperationHandlers } from '../context.ts';

type PathParams = operations['ingestEvents']['parameters']['path'];

/** Handlers of the `webhooks` tag. */
export function webhookHandlers(conversations: ConversationService, conversationInfos: ConversationInfoService): OperationHandlers {
  return {
    async ingestEvents(operation, ctx) {
      const { conversation_id } = operation.request.params as PathParams;
      await conversations.ingest(principalOf(operation), conversation_id, operation.request.requestBody as Event[]);
      respond<components['schemas']['Success']>(ctx, 200, { success: true });
    },
    async receiveConversationInfo(operation, ctx) {
      const info = operation.request.requestBody as ConversationInfo;
      const { created, conversation } = await conversationInfos.receive(principalOf(operation), info);
      respond<components['schemas']['Conversation']>(ctx, created ? 201 : 200, conversation);
    },
  };
}
