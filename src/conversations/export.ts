import type { Writable } from 'node:stream';
import type { EntityManager } from '@mikro-orm/postgresql';
import { to as copyTo } from 'pg-copy-streams';
import { storedEventHead, withoutEncryptedContent } from './mapper.ts';
import { conversationInfoText, exportPageCopy } from './queries.ts';
import { readConversationView } from './views.ts';

/**
 * What an export reads per query: at most `PAGE_ROWS` events and about `pageBytes` of them as stored
 * (at least one). Each page is a `COPY … TO STDOUT (FORMAT binary)`: the payloads arrive as bytes and
 * go out as the same bytes, with no string per row (strings by the million are promoted by the
 * garbage collector faster than it frees them: the server's memory grew by 200 MB over an export),
 * and the lines are formatted here (PostgreSQL's `to_char` and `string_agg` cost five times the reading).
 */
const PAGE_ROWS = 1_000;
const DEFAULT_PAGE_BYTES = 1024 * 1024;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const COPY_SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
const ENCRYPTED_CONTENT_KEY = Buffer.from('"encrypted_content":"');
const LINE_END = Buffer.from('}\n');

interface ExportRow {
  seq: number;
  receivedMs: number;
  payload: Buffer;
  /** The `unrecognized` marker's text (ASCII), or null. */
  unrecognized: string | null;
}

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
 * One conversation as NDJSON, in chunks of whole lines (one per page read): first
 * `{"conversation": <view>, "info": <stored ConversationInfo or null>}`, then each stored event as a `StoredEvent`, in seq
 * order, its payload the stored text (`\u0000`, lone surrogates and large numbers as sent).
 *
 * Constant memory whatever the conversation's size: events are read one bounded page at a time
 * (by seq, on the primary key), at most one page ahead of what the consumer has asked for (pull).
 * A consistent cut: the events up to the `event_count` of the first line. Does not check who may
 * read it; unknown conversation → throws on first pull.
 *
 * **A chunk is valid until the next pull**: pages are read into, and written out of, the same two
 * Buffers for the whole export (see `writeChunks`). Fresh Buffers per page are external memory that
 * V8 frees only when it collects the old generation, at about 64 MB of them: the server's memory grew
 * by 80 MB over an export (docs/search.md).
 */
export async function* conversationExport(
  em: EntityManager,
  conversationId: string,
  options: ConversationExportOptions = {},
): AsyncGenerator<Buffer> {
  const pageBytes = options.pageBytes ?? DEFAULT_PAGE_BYTES;
  const read = await readConversationView(em, conversationId);
  if (!read) throw new Error(`conversation ${conversationId} does not exist`);
  const info = await conversationInfoText(em, conversationId);
  yield Buffer.from(`{"conversation":${JSON.stringify(read.view)},"info":${info ?? 'null'}}\n`);
  const lastSeq = read.view.event_count;
  // COPY takes no parameters: the values are checked, then written into the statement.
  if (!UUID.test(read.view.id)) throw new Error(`unexpected conversation id ${read.view.id}`);
  // Reused for every page: the COPY's bytes in, the NDJSON lines out (each grows to the largest page).
  const input = new GrowableBuffer(pageBytes + 64 * 1024);
  const output = new GrowableBuffer(pageBytes + 64 * 1024);
  const readPage = async (after: number): Promise<ExportRow[]> => {
    const client = em.getConnection().getKnex().client;
    const connection = await client.acquireConnection();
    try {
      input.length = 0;
      const copy = connection.query(copyTo(exportPageCopy(read.view.id, after, lastSeq, PAGE_ROWS, pageBytes)));
      for await (const chunk of copy) input.append(chunk as Buffer);
      return copyRows(input.bytes());
    } finally {
      client.releaseConnection(connection);
    }
  };
  let next = lastSeq > 0 ? readPage(0) : undefined;
  while (next) {
    const rows = await next;
    const last = rows.at(-1);
    if (!last) break;
    // The page is copied out of `input` before the next page is read into it, while this one is written out.
    const lines = pageLines(rows, options.keepEncryptedContent === true, output);
    next = last.seq < lastSeq ? readPage(last.seq) : undefined;
    // A consumer that stops leaves one page read for nothing.
    next?.catch(() => undefined);
    yield lines;
  }
}

/**
 * Writes each chunk of `chunks` to `sink` and waits until the sink has taken it (its write callback:
 * handed to the socket, or consumed by a transform) before pulling the next, as the export's reused
 * Buffers require. Stops early, without error, when the sink is destroyed (a client that went away).
 */
export async function writeChunks(chunks: AsyncIterable<Buffer>, sink: Writable): Promise<void> {
  for await (const chunk of chunks) {
    if (sink.destroyed) return;
    // A write that fails because the sink was destroyed ends the loop above; its owner reports why.
    await new Promise<void>((resolve, reject) => sink.write(chunk, (error) => (error && !sink.destroyed ? reject(error) : resolve())));
  }
}

/** A Buffer reused across pages: `length` bytes in use, doubled when a page needs more. */
class GrowableBuffer {
  length = 0;
  private buffer: Buffer;

  constructor(initialBytes: number) {
    this.buffer = Buffer.allocUnsafe(initialBytes);
  }

  append(bytes: Buffer): void {
    this.reserve(bytes.length);
    this.length += bytes.copy(this.buffer, this.length);
  }

  /** Room for `bytes` more after `length`; what is in use is kept. */
  reserve(bytes: number): Buffer {
    if (this.length + bytes > this.buffer.length) {
      const larger = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, this.length + bytes));
      this.buffer.copy(larger, 0, 0, this.length);
      this.buffer = larger;
    }
    return this.buffer;
  }

  bytes(): Buffer {
    return this.buffer.subarray(0, this.length);
  }
}

/** The rows of `COPY … (FORMAT binary)` of (seq int4, received ms float8, payload text, unrecognized text or null); payloads are views of `data`. */
function copyRows(data: Buffer): ExportRow[] {
  if (data.length < 19 || !data.subarray(0, 11).equals(COPY_SIGNATURE)) throw new Error('not a binary COPY stream');
  let at = 15;
  at += 4 + data.readInt32BE(at); // header extension
  const rows: ExportRow[] = [];
  for (;;) {
    const fields = data.readInt16BE(at);
    at += 2;
    if (fields === -1) return rows;
    if (fields !== 4 || data.readInt32BE(at) !== 4 || data.readInt32BE(at + 8) !== 8) throw new Error('unexpected binary COPY row');
    const seq = data.readInt32BE(at + 4);
    const receivedMs = data.readDoubleBE(at + 12);
    const length = data.readInt32BE(at + 20);
    at += 24;
    const payload = data.subarray(at, at + length);
    at += length;
    const markerLength = data.readInt32BE(at);
    at += 4;
    const unrecognized = markerLength < 0 ? null : data.toString('latin1', at, at + markerLength);
    if (markerLength > 0) at += markerLength;
    rows.push({ seq, receivedMs, payload, unrecognized });
  }
}

/** `{"seq":…,"received_at":"…","event":<payload as stored>}` per row, each on its own line, written into `output`. */
function pageLines(rows: ExportRow[], keepEncryptedContent: boolean, output: GrowableBuffer): Buffer {
  const heads: string[] = [];
  const events: Buffer[] = [];
  let size = 0;
  for (const row of rows) {
    const head = storedEventHead(row.seq, new Date(row.receivedMs).toISOString(), row.unrecognized);
    const event =
      keepEncryptedContent || !row.payload.includes(ENCRYPTED_CONTENT_KEY)
        ? row.payload
        : Buffer.from(withoutEncryptedContent(row.payload.toString('utf8')));
    heads.push(head);
    events.push(event);
    size += head.length + event.length + LINE_END.length;
  }
  output.length = 0;
  const page = output.reserve(size);
  let at = 0;
  for (let i = 0; i < heads.length; i++) {
    at += page.write(heads[i]!, at, 'latin1');
    at += events[i]!.copy(page, at);
    at += LINE_END.copy(page, at);
  }
  output.length = at;
  return output.bytes();
}
