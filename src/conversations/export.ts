import type { EntityManager } from '@mikro-orm/postgresql';
import { sqlRows } from '../db/sql.ts';
import { withoutEncryptedContent } from './mapper.ts';
import { readConversationView } from './views.ts';

/**
 * What an export reads per query: at most `PAGE_ROWS` events and about `pageBytes` of them (at
 * least one). Pages are assembled by PostgreSQL into one string each, kept under V8's large-object
 * size (128 KB): each page then dies young, and the server's memory stays flat whatever the size of
 * the conversation (per-row strings of larger pages were promoted to the old generation faster than
 * it was collected).
 */
const PAGE_ROWS = 150;
const DEFAULT_PAGE_BYTES = 112 * 1024;

export interface ConversationExportOptions {
  /** Bytes of stored payloads read per query (one larger event is still read alone). */
  pageBytes?: number;
  /**
   * Keep `encrypted_content` as stored. The API renders it as null, as everywhere; an archive
   * meant to restore the conversation keeps it.
   */
  keepEncryptedContent?: boolean;
}

/**
 * One conversation as NDJSON, in chunks of whole lines (strings, one per page read): first
 * `{"conversation": <view>, "info": <stored ConversationInfo or null>}`, then each stored event as a `StoredEvent`, in seq
 * order, its payload the stored text (`\u0000`, lone surrogates and large numbers as sent).
 *
 * Constant memory whatever the conversation's size: events are read one bounded page at a time
 * (by seq, on the primary key), and the next page only when the consumer asks for more (pull).
 * A consistent cut: the events up to the `event_count` of the first line. Does not check who may
 * read it; unknown conversation → throws on first pull.
 */
export async function* conversationExport(
  em: EntityManager,
  conversationId: string,
  options: ConversationExportOptions = {},
): AsyncGenerator<string> {
  const pageBytes = options.pageBytes ?? DEFAULT_PAGE_BYTES;
  const read = await readConversationView(em, conversationId);
  if (!read) throw new Error(`conversation ${conversationId} does not exist`);
  const [info] = await sqlRows<{ info: string }>(em, 'select info::text as info from conversation_infos where conversation_id = $1', [
    conversationId,
  ]);
  yield `{"conversation":${JSON.stringify(read.view)},"info":${info?.info ?? 'null'}}\n`;
  const lastSeq = read.view.event_count;
  let after = 0;
  while (after < lastSeq) {
    // Rows up to the byte budget, counted before the payload is read out (pg_column_size does not detoast).
    const [page] = await sqlRows<{ last: number | null; text: string | null }>(
      em,
      `select max(seq) as last, string_agg(concat('{"seq":', seq, ',"received_at":"',
           to_char(received_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), '","event":', payload, '}', chr(10)),
           '' order by seq) as text
       from (
         select seq, received_at, payload,
           sum(pg_column_size(payload)) over (order by seq) - pg_column_size(payload) as before_bytes
         from conversation_events
         where conversation_id = $1 and seq > $2 and seq <= $3
         order by seq limit $4) page
       where before_bytes < $5 or seq = $2 + 1`,
      [conversationId, after, lastSeq, PAGE_ROWS, pageBytes],
      'conversation_export_page',
    );
    if (!page?.text || page.last === null) break;
    after = page.last;
    yield options.keepEncryptedContent ? page.text : withoutEncryptedContent(page.text);
  }
}
