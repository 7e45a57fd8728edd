import { EntitySchema } from '@mikro-orm/core';
import { User } from '../identity/entities.ts';

/** A conversation of an agent runtime, created by its first webhook delivery. */
export class Conversation {
  id!: string;
  owner!: User;
  executionStatus: string | null = null;
  eventCount = 0;
  createdAt: Date = new Date();
  updatedAt: Date = new Date();
  lastEventAt: Date | null = null;
}

/**
 * One stored event, exactly as received (with schema defaults applied). `payload` is a `json`
 * column (text kept verbatim, see Migration20261122015000_lossless_payloads); events are written by
 * `ingest_event_batches` and read back as text, never through this entity's JSON mapping.
 */
export class ConversationEvent {
  conversation!: Conversation;
  seq!: number;
  eventId!: string;
  kind!: string;
  payload!: string;
  receivedAt: Date = new Date();
}

export const ConversationSchema = new EntitySchema<Conversation>({
  class: Conversation,
  tableName: 'conversations',
  properties: {
    id: { type: 'uuid', primary: true },
    owner: { kind: 'm:1', entity: () => User },
    executionStatus: { type: 'string', length: 32, nullable: true },
    eventCount: { type: 'integer' },
    createdAt: { type: 'Date' },
    updatedAt: { type: 'Date' },
    lastEventAt: { type: 'Date', nullable: true },
  },
});

export const ConversationEventSchema = new EntitySchema<ConversationEvent>({
  class: ConversationEvent,
  tableName: 'conversation_events',
  properties: {
    conversation: { kind: 'm:1', entity: () => Conversation, primary: true },
    seq: { type: 'integer', primary: true },
    eventId: { type: 'text' },
    kind: { type: 'string', length: 64 },
    payload: { type: 'text', columnType: 'json' },
    receivedAt: { type: 'Date' },
  },
});
