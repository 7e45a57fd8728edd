import type { components } from '../../generated/openapi.ts';
import { parseJson } from '../lossless-json.ts';
import { microUsdNumberOf, usdOf } from '../spend/money.ts';

type ConversationView = components['schemas']['Conversation'];
type MetricsSnapshot = components['schemas']['MetricsSnapshot'];

/** One row of `CONVERSATION_VIEW_COLUMNS` (queries.ts): JSON columns as text, parsed here losslessly. */
export interface ConversationViewRow {
  id: string;
  owner_id: string;
  execution_status: string | null;
  event_count: number;
  created_at: Date | string;
  updated_at: Date | string;
  last_event_at: Date | string | null;
  renamed_title: string | null;
  parent_conversation_id: string | null;
  tags: string | null;
  info_title: string | null;
  metrics: string | null;
  forked_from_conversation_id: string | null;
  /** What the spend ledger has charged for the conversation, in micro-dollars. */
  cost_micro_usd: string;
  /** Its events stored under `accept-unknown` with something the contract does not know. */
  unrecognized_event_count: number;
}

const iso = (value: Date | string): string => new Date(value).toISOString();

/**
 * A conversation as the API shows it. The title: the owner's rename while it holds (see
 * `ConversationInfoService.receive`), else the agent-server's.
 */
export function toConversationView(
  row: ConversationViewRow,
  subConversationIds: string[],
  deliveryRefusals: ConversationView['delivery_refusals'],
): ConversationView {
  return {
    id: row.id,
    title: row.renamed_title ?? (row.info_title === null ? null : (parseJson(row.info_title) as string | null)),
    execution_status: row.execution_status as ConversationView['execution_status'],
    event_count: row.event_count,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
    last_event_at: row.last_event_at === null ? null : iso(row.last_event_at),
    metrics: row.metrics === null ? null : (parseJson(row.metrics) as MetricsSnapshot | null),
    parent_conversation_id: row.parent_conversation_id,
    sub_conversation_ids: subConversationIds,
    forked_from_conversation_id: row.forked_from_conversation_id,
    tags: row.tags === null ? {} : (JSON.parse(row.tags) as Record<string, string>),
    accumulated_cost_usd: usdOf(BigInt(row.cost_micro_usd)),
    accumulated_cost_micro_usd: microUsdNumberOf(BigInt(row.cost_micro_usd)),
    unrecognized_event_count: row.unrecognized_event_count,
    delivery_refusals: deliveryRefusals,
  };
}

/**
 * `encrypted_content` (of `ReasoningItemModel`) is stored but never rendered: it reads back as null.
 * Payloads are the text `stringifyJson` wrote, so a key is always written plainly and a quote
 * inside a string is always escaped: the pattern matches the key, never text inside a value.
 */
const ENCRYPTED_CONTENT = /"encrypted_content":"(?:[^"\\]|\\.)*"/g;

export function withoutEncryptedContent(payload: string): string {
  return payload.includes('"encrypted_content":"') ? payload.replace(ENCRYPTED_CONTENT, '"encrypted_content":null') : payload;
}

/** A stored event as read back: the payload stays the text that was stored. */
export interface StoredEventRow {
  seq: number;
  /** As `STORED_EVENT_COLUMNS` writes it: ISO 8601 UTC with milliseconds, as `toISOString` would. */
  received_at: string;
  payload: string;
  /** The event's `unrecognized` marker as JSON text (ASCII), or null for an event the contract knows. */
  unrecognized: string | null;
}

/**
 * What a `StoredEvent`'s JSON holds before its event: the one place its shape is written (the event
 * by id, the list and the export all use it, so an export line reads as the list's item). ASCII only:
 * its length is its byte count.
 */
export function storedEventHead(seq: number, receivedAt: string, unrecognized: string | null): string {
  if (unrecognized !== null) return `{"seq":${seq},"received_at":"${receivedAt}","unrecognized":${unrecognized},"event":`;
  return `{"seq":${seq},"received_at":"${receivedAt}","event":`;
}

/**
 * A `StoredEvent` as JSON text. The stored payload is spliced in as it is: parsing it here would
 * round large numbers, and it was written by `stringifyJson`, so it is valid JSON.
 */
export function toStoredEventJson(row: StoredEventRow, options: { keepEncryptedContent?: boolean } = {}): string {
  const event = options.keepEncryptedContent ? row.payload : withoutEncryptedContent(row.payload);
  return `${storedEventHead(row.seq, row.received_at, row.unrecognized)}${event}}`;
}

/**
 * An `EventPage` as the bytes of its JSON, written once into one Buffer. Joining the events as
 * strings made four copies of each page in the young generation (the lines, the join, the page,
 * its flattening): a 100-event page allocated about 1 MB, and the collections that copied it set
 * the p99 of page reads (docs/search.md).
 */
export function eventPageBody(
  rows: StoredEventRow[],
  next: { afterSeq: number | null; beforeSeq: number | null; cursor: string | null; indexedThrough?: string },
  payloadOf: (payload: string) => string = withoutEncryptedContent,
): Buffer {
  const heads: string[] = [];
  const events: string[] = [];
  let size = 0;
  for (const [i, row] of rows.entries()) {
    const head = `${i === 0 ? '' : ','}${storedEventHead(row.seq, row.received_at, row.unrecognized)}`;
    const event = payloadOf(row.payload);
    heads.push(head);
    events.push(event);
    size += head.length + Buffer.byteLength(event) + 1;
  }
  const start = '{"items":[';
  const through = next.indexedThrough === undefined ? '' : `,"indexed_through":${JSON.stringify(next.indexedThrough)}`;
  const end = `],"next_after_seq":${next.afterSeq},"next_before_seq":${next.beforeSeq},"next_cursor":${next.cursor === null ? 'null' : JSON.stringify(next.cursor)}${through}}`;
  const body = Buffer.allocUnsafe(start.length + size + Buffer.byteLength(end));
  let at = body.write(start, 0, 'latin1');
  for (let i = 0; i < heads.length; i++) {
    at += body.write(heads[i]!, at, 'latin1');
    at += body.write(events[i]!, at, 'utf8');
    body[at++] = 0x7d; // }
  }
  body.write(end, at, 'utf8');
  return body;
}
