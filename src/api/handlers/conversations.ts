import type { components, operations } from '../../../generated/openapi.ts';
import type { ConversationService } from '../../conversations/conversation-service.ts';
import { writeChunks } from '../../conversations/export.ts';
import type { ConversationFilterInput, EventFilterInput } from '../../conversations/search.ts';
import { principalOf, respond, respondWithJsonText, type OperationHandlers } from '../context.ts';

type ConversationPath = operations['getConversation']['parameters']['path'];
type EventPath = operations['getConversationEvent']['parameters']['path'];
type ListConversationsQuery = NonNullable<operations['listConversations']['parameters']['query']>;
type CountConversationsQuery = NonNullable<operations['countConversations']['parameters']['query']>;
type ListEventsQuery = NonNullable<operations['listConversationEvents']['parameters']['query']>;
type CountEventsQuery = NonNullable<operations['countConversationEvents']['parameters']['query']>;
type Rename = components['schemas']['ConversationRename'];

/** A repeatable query parameter: validation has made it an array when given. */
const list = <T>(value: T[] | T | undefined): T[] | undefined => (value === undefined ? undefined : Array.isArray(value) ? value : [value]);

function eventFilterOf(query: CountEventsQuery): EventFilterInput {
  return {
    afterSeq: query.after_seq,
    beforeSeq: query.before_seq,
    kinds: list(query.kind),
    ids: list(query.id),
    sources: list(query.source),
    since: query.since,
    until: query.until,
    q: query.q,
  };
}

function conversationFilterOf(query: CountConversationsQuery): ConversationFilterInput {
  return {
    q: query.q,
    statuses: list(query.status),
    createdSince: query.created_since,
    createdUntil: query.created_until,
    updatedSince: query.updated_since,
    updatedUntil: query.updated_until,
    tags: list(query.tag),
    parentConversationId: query.parent_conversation_id,
  };
}

/** Handlers of the `conversations` tag: reading back, searching and exporting what the webhook stored. */
export function conversationHandlers(conversations: ConversationService): OperationHandlers {
  return {
    async listConversations(operation, ctx) {
      const query = (operation.request.query ?? {}) as ListConversationsQuery;
      const page = await conversations.listConversations(principalOf(operation), {
        filter: conversationFilterOf(query),
        sort: query.sort ?? 'created_desc',
        limit: query.limit ?? 20,
        cursor: query.cursor,
      });
      respond(ctx, 200, page);
    },
    async countConversations(operation, ctx) {
      const query = (operation.request.query ?? {}) as CountConversationsQuery;
      const count = await conversations.countConversations(principalOf(operation), conversationFilterOf(query));
      respond<components['schemas']['Count']>(ctx, 200, { count });
    },
    async getConversation(operation, ctx) {
      const { conversation_id } = operation.request.params as ConversationPath;
      respond(ctx, 200, await conversations.getConversation(principalOf(operation), conversation_id));
    },
    async renameConversation(operation, ctx) {
      const { conversation_id } = operation.request.params as ConversationPath;
      const { title } = operation.request.requestBody as Rename;
      respond(ctx, 200, await conversations.renameConversation(principalOf(operation), conversation_id, title));
    },
    async listConversationEvents(operation, ctx) {
      const { conversation_id } = operation.request.params as ConversationPath;
      const query = (operation.request.query ?? {}) as ListEventsQuery;
      const page = await conversations.listEvents(principalOf(operation), conversation_id, {
        filter: eventFilterOf(query),
        order: query.order ?? 'asc',
        limit: query.limit ?? 100,
        cursor: query.cursor,
      });
      respondWithJsonText(ctx, 200, page);
    },
    async countConversationEvents(operation, ctx) {
      const { conversation_id } = operation.request.params as ConversationPath;
      const query = (operation.request.query ?? {}) as CountEventsQuery;
      const count = await conversations.countEvents(principalOf(operation), conversation_id, eventFilterOf(query));
      respond<components['schemas']['Count']>(ctx, 200, { count });
    },
    async getConversationEvent(operation, ctx) {
      const { conversation_id, event_id } = operation.request.params as EventPath;
      respondWithJsonText(ctx, 200, await conversations.getEvent(principalOf(operation), conversation_id, event_id));
    },
    async exportConversation(operation, ctx) {
      const { conversation_id } = operation.request.params as ConversationPath;
      const { id, chunks } = await conversations.exportConversation(principalOf(operation), conversation_id);
      ctx.status = 200;
      ctx.type = 'application/x-ndjson';
      ctx.set('Content-Disposition', `attachment; filename="conversation-${id}.ndjson"`);
      if (ctx.method === 'HEAD') return;
      // Written here rather than by Koa: each page is written out of a Buffer the export reuses, so the
      // next is read only once the socket has taken this one (writeChunks).
      ctx.respond = false;
      try {
        await writeChunks(chunks, ctx.res);
        ctx.res.end();
      } catch (error) {
        // The status line has gone: an export cut short ends without its last chunk, as the client sees it.
        ctx.res.destroy(error as Error);
        throw error;
      }
    },
  };
}
