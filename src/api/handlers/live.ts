import type { Context as OperationContext } from 'openapi-backend';
import type { components, operations } from '../../../generated/openapi.ts';
import type { ConversationService } from '../../conversations/conversation-service.ts';
import { ForbiddenError } from '../../errors.ts';
import type { Principal } from '../../identity/authenticator.ts';
import type { LiveStreams } from '../../live/live-streams.ts';
import type { StreamTickets } from '../../live/stream-tickets.ts';
import { canonicalUuid } from '../../uuid.ts';
import { principalOf, respond, type OperationHandlers } from '../context.ts';

/** The largest sequence number (an `integer` column), as `after_seq`'s maximum in the spec. */
const MAX_SEQ = 2_147_483_647;

type ConversationPath = operations['streamConversationEvents']['parameters']['path'];
type StreamQuery = NonNullable<operations['streamConversationEvents']['parameters']['query']>;

/** Handlers of the `live` tag: live event streams, their tickets, and the old page's address (now a redirect to the console). */
export function liveHandlers(conversations: ConversationService, live: LiveStreams, tickets: StreamTickets): OperationHandlers {
  return {
    async streamConversationEvents(operation, ctx) {
      const { conversation_id } = operation.request.params as ConversationPath;
      const query = operation.request.query as StreamQuery;
      const principal = streamPrincipal(operation, canonicalUuid(conversation_id));
      const lastEventId = ctx.get('last-event-id');
      // Last-Event-ID (up to ten digits, per the spec) may name more than a sequence number can be:
      // then nothing stored comes after it, as after the largest one.
      const afterSeq = lastEventId ? Math.min(Number(lastEventId), MAX_SEQ) : (query.after_seq ?? 0);
      await live.subscribe(principal, conversation_id, afterSeq, ctx.res);
      // The subscriber writes the response itself, for as long as the stream lasts.
      ctx.respond = false;
    },
    async createStreamTicket(operation, ctx) {
      const { conversation_id } = operation.request.params as ConversationPath;
      const principal = principalOf(operation);
      const conversation = await conversations.getConversation(principal, conversation_id);
      const { ticket, expiresAt } = await tickets.issue(principal, conversation.id);
      respond<components['schemas']['StreamTicket']>(ctx, 201, { ticket, expires_at: expiresAt.toISOString() });
    },
    getLiveConversationPage(operation, ctx) {
      const { conversation_id } = operation.request.params as ConversationPath;
      // The console's viewer replaced the old page; old links land there. The spec's 302 has no body
      // (Koa's redirect would add a "Redirecting to" text).
      ctx.status = 302;
      ctx.set('Location', `/#/conversations/${canonicalUuid(conversation_id)}`);
      ctx.body = '';
    },
  };
}

/** The caller of a stream: the access token's holder, or the ticket's (for its conversation only). */
function streamPrincipal(operation: OperationContext, conversationId: string): Principal {
  const results = (operation.security ?? {}) as Record<string, unknown>;
  const ticket = results.StreamTicket as { principal: Principal; conversationId: string } | { error: unknown } | undefined;
  if (ticket && !('error' in ticket)) {
    if (ticket.conversationId !== conversationId) throw new ForbiddenError('This ticket is for another conversation');
    return ticket.principal;
  }
  return principalOf(operation);
}
