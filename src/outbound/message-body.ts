import type { SqlRunner } from '../db/sql.ts';
import type { MessageRow } from './mapper.ts';
import { eventPayloads, eventPayloadsOf } from './queries.ts';

/** A `conversation.events` body larger than this carries the events' ids only. */
export const MAX_EVENTS_BODY_BYTES = 256 * 1024;

type BodySource = Pick<MessageRow, 'type' | 'created_at' | 'data'>;
type StoredEvent = { seq: number; event_id: string; payload: string; unrecognized: string | null };
type EventsRange = { conversation_id: string; from_seq: number; to_seq: number };

/** `{"type", "timestamp", "data"}`, the same bytes on every attempt (stored events do not change). */
export async function messageBody(on: SqlRunner, message: BodySource): Promise<string> {
  if (message.type !== 'conversation.events') return bodyOf(message, []);
  const { conversation_id, from_seq, to_seq } = message.data as EventsRange;
  return bodyOf(message, await eventPayloads(on, conversation_id, from_seq, to_seq));
}

/** `messageBody` of several messages (by id), their events read in one statement. */
export async function messageBodies(on: SqlRunner, messages: readonly (BodySource & { id: string })[]): Promise<Map<string, string>> {
  const ranges = messages.filter((m) => m.type === 'conversation.events').map((m) => m.data as EventsRange);
  const rows = ranges.length === 0 ? [] : await eventPayloadsOf(on, ranges.map((r) => ({ conversationId: r.conversation_id, fromSeq: r.from_seq, toSeq: r.to_seq })));
  const byConversation = new Map<string, StoredEvent[]>();
  for (const row of rows) {
    let events = byConversation.get(row.conversation_id);
    if (!events) byConversation.set(row.conversation_id, (events = []));
    events.push(row);
  }
  const bodies = new Map<string, string>();
  for (const message of messages) {
    if (message.type !== 'conversation.events') {
      bodies.set(message.id, bodyOf(message, []));
      continue;
    }
    const { conversation_id, from_seq, to_seq } = message.data as EventsRange;
    const events = (byConversation.get(conversation_id) ?? []).filter((e) => e.seq >= from_seq && e.seq <= to_seq);
    bodies.set(message.id, bodyOf(message, events));
  }
  return bodies;
}

function bodyOf(message: BodySource, events: readonly StoredEvent[]): string {
  const head = `{"type":${JSON.stringify(message.type)},"timestamp":${JSON.stringify(new Date(message.created_at).toISOString())},"data":`;
  if (message.type !== 'conversation.events') return `${head}${JSON.stringify(message.data)}}`;
  const { conversation_id, from_seq, to_seq } = message.data as EventsRange;
  const range = `"conversation_id":${JSON.stringify(conversation_id)},"from_seq":${from_seq},"to_seq":${to_seq}`;
  const size = events.reduce((total, e) => total + Buffer.byteLength(e.payload) + 1, 0);
  const marked = unrecognizedOf(events);
  if (size > MAX_EVENTS_BODY_BYTES) {
    return `${head}{${range},"event_ids":${JSON.stringify(events.map((e) => e.event_id))}${marked}}}`;
  }
  // Each event goes as the JSON text that was stored, byte for byte (see src/lossless-json.ts).
  return `${head}{${range},"events":[${events.map((e) => e.payload).join(',')}]${marked}}}`;
}

/** `,"unrecognized":[{seq, event_id, kind, properties}, …]` for the events the contract does not know (as the events list marks them); empty when none. */
function unrecognizedOf(events: readonly StoredEvent[]): string {
  const marked = events.filter((e) => e.unrecognized !== null);
  if (marked.length === 0) return '';
  return `,"unrecognized":${JSON.stringify(marked.map((e) => ({ seq: e.seq, event_id: e.event_id, ...(JSON.parse(e.unrecognized!) as object) })))}`;
}
