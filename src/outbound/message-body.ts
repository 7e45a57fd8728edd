import type { SqlRunner } from '../db/sql.ts';
import type { MessageRow } from './mapper.ts';
import { eventPayloads } from './queries.ts';

/** A `conversation.events` body larger than this carries the events' ids only. */
export const MAX_EVENTS_BODY_BYTES = 256 * 1024;

/** `{"type", "timestamp", "data"}`, the same bytes on every attempt (stored events do not change). */
export async function messageBody(on: SqlRunner, message: Pick<MessageRow, 'type' | 'created_at' | 'data'>): Promise<string> {
  const head = `{"type":${JSON.stringify(message.type)},"timestamp":${JSON.stringify(new Date(message.created_at).toISOString())},"data":`;
  if (message.type !== 'conversation.events') return `${head}${JSON.stringify(message.data)}}`;
  const { conversation_id, from_seq, to_seq } = message.data as { conversation_id: string; from_seq: number; to_seq: number };
  const events = await eventPayloads(on, conversation_id, from_seq, to_seq);
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
function unrecognizedOf(events: readonly { seq: number; event_id: string; unrecognized: string | null }[]): string {
  const marked = events.filter((e) => e.unrecognized !== null);
  if (marked.length === 0) return '';
  return `,"unrecognized":${JSON.stringify(marked.map((e) => ({ seq: e.seq, event_id: e.event_id, ...(JSON.parse(e.unrecognized!) as object) })))}`;
}
