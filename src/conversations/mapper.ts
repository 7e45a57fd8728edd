import type { components } from '../../generated/openapi.ts';
import type { Conversation } from './entities.ts';
import type { ConversationInfoSummary } from './conversation-info-service.ts';

type ConversationView = components['schemas']['Conversation'];

/** A conversation as the API shows it, with the title and metrics of its latest conversation info. */
export function toConversationView(conversation: Conversation, info?: ConversationInfoSummary): ConversationView {
  return {
    id: conversation.id,
    title: info?.title ?? null,
    execution_status: conversation.executionStatus as ConversationView['execution_status'],
    event_count: conversation.eventCount,
    created_at: conversation.createdAt.toISOString(),
    updated_at: conversation.updatedAt.toISOString(),
    last_event_at: conversation.lastEventAt?.toISOString() ?? null,
    metrics: info?.metrics ?? null,
  };
}

/**
 * An `EventPage` as JSON text. The stored payloads are spliced in as they are: parsing them here
 * would round large numbers, and they were written by `stringifyJson`, so they are valid JSON.
 */
/**
 * `encrypted_content` (of `ReasoningItemModel`) is stored but never rendered: it reads back as null.
 * Payloads are the text `stringifyJson` wrote, so a key is always written plainly and a quote
 * inside a string is always escaped: the pattern matches the key, never text inside a value.
 */
const ENCRYPTED_CONTENT = /"encrypted_content":"(?:[^"\\]|\\.)*"/g;

export function withoutEncryptedContent(payload: string): string {
  return payload.includes('"encrypted_content":"') ? payload.replace(ENCRYPTED_CONTENT, '"encrypted_content":null') : payload;
}

/** One stored event as JSON text (`StoredEvent`: seq, received_at, the event as stored), as lists and archives render it. */
export function toStoredEventJson(row: { seq: number; received_at: string; payload: string }): string {
  return `{"seq":${row.seq},"received_at":"${new Date(row.received_at).toISOString()}","event":${withoutEncryptedContent(row.payload)}}`;
}

export function toEventPageJson(rows: { seq: number; received_at: string; payload: string }[], more: boolean): string {
  const items = rows.map(toStoredEventJson);
  const nextAfterSeq = more ? rows[rows.length - 1]!.seq : null;
  return `{"items":[${items.join(',')}],"next_after_seq":${nextAfterSeq}}`;
}
