import type { operations } from '../../../generated/openapi.ts';
import type { ConversationService } from '../../conversations/conversation-service.ts';
import { principalOf, respond, respondWithJsonText, type OperationHandlers } from '../context.ts';

type ConversationPath = operations['getConversation']['parameters']['path'];
type ListConversationsQuery = NonNullable<operations['listConversations']['parameters']['query']>;
type ListEventsQuery = NonNullable<operations['listConversationEvents']['parameters']['query']>;

/** Handlers of the `conversations` tag: reading back what the webhook stored. */
export function conversationHandlers(conversations: ConversationService): OperationHandlers {
  return {
    async listConversations(operation, ctx) {
      const query = operation.request.query as ListConversationsQuery;
      const page = await conversations.listConversations(principalOf(operation), {
        limit: query.limit ?? 20,
        cursor: query.cursor,
      });
      respond(ctx, 200, page);
    },
    async getConversation(operation, ctx) {
      const { conversation_id } = operation.request.params as ConversationPath;
      respond(ctx, 200, await conversations.getConversation(principalOf(operation), conversation_id));
    },
    async listConversationEvents(operation, ctx) {
      const { conversation_id } = operation.request.params as ConversationPath;
      const query = operation.request.query as ListEventsQuery;
      const page = await conversations.listEvents(principalOf(operation), conversation_id, {
        afterSeq: query.after_seq ?? 0,
        limit: query.limit ?? 100,
        kind: query.kind,
      });
      respondWithJsonText(ctx, 200, page);
    },
  };
}
