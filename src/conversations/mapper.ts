import type { components } from '../../generated/openapi.ts';
import type { Conversation, ConversationEvent } from './entities.ts';

type ConversationView = components['schemas']['Conversation'];

/** A conversation as the API shows it. */
export function toConversationView(conversation: Conversation): ConversationView {
  return {
    id: conversation.id,
    execution_status: conversation.executionStatus as ConversationView['execution_status'],
    event_count: conversation.eventCount,
    created_at: conversation.createdAt.toISOString(),
    updated_at: conversation.updatedAt.toISOString(),
    last_event_at: conversation.lastEventAt?.toISOString() ?? null,
  };
}

/** A stored event as the API shows it: the event exactly as stored, with its place in the log. */
export function toStoredEventView(event: ConversationEvent): components['schemas']['StoredEvent'] {
  return {
    seq: event.seq,
    received_at: event.receivedAt.toISOString(),
    event: event.payload as components['schemas']['Event'],
  };
}
