import type { IndexLexemes } from './text.ts';

/**
 * `event_search` rows in PostgreSQL's binary COPY format: the tsvector goes as its binary form
 * (tsvectorrecv), so the server parses neither a literal nor an array of them: a quarter less of its
 * CPU per indexed event than the text path (docs/search.md, "What indexing costs").
 */

/** Microseconds from the Unix epoch to PostgreSQL's (2000-01-01). */
const POSTGRES_EPOCH_MICROS = 946_684_800_000_000n;
const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
/** Columns of a row, in the order of INDEX_COLUMNS. */
const FIELDS = 7;
/** The columns the COPY fills (`ordinal` comes from its identity, in the order the rows are written). */
export const INDEX_COLUMNS = '(conversation_id, seq, owner_id, kind, source, event_time, lexemes)';
/** The longest lexeme PostgreSQL takes, in bytes (MAXSTRLEN). */
const MAX_LEXEME_BYTES = 2047;

export interface IndexRow {
  conversationId: string;
  seq: number;
  ownerId: string;
  kind: string;
  source: string | null;
  /** event_time as microseconds since the Unix epoch (decimal text: exact, where a Date keeps milliseconds). */
  eventMicros: string;
  lexemes: IndexLexemes;
}

/** Appends rows to one growing buffer: header first, trailer at `finish()`. */
export class IndexRowsCopy {
  private buffer = Buffer.allocUnsafe(256 * 1024);
  private length = 0;
  rows = 0;

  constructor() {
    this.bytes(SIGNATURE);
    this.int32(0); // flags
    this.int32(0); // header extension
  }

  add(row: IndexRow): void {
    this.int16(FIELDS);
    this.uuid(row.conversationId);
    this.int32(4);
    this.int32(row.seq);
    this.uuid(row.ownerId);
    this.text(row.kind);
    if (row.source === null) this.int32(-1);
    else this.text(row.source);
    this.int32(8);
    this.reserve(8);
    this.buffer.writeBigInt64BE(BigInt(row.eventMicros) - POSTGRES_EPOCH_MICROS, this.length);
    this.length += 8;
    this.tsvector(row.lexemes);
    this.rows++;
  }

  /** The COPY's bytes, trailer included. */
  finish(): Buffer {
    this.int16(-1);
    return this.buffer.subarray(0, this.length);
  }

  /** tsvectorrecv's form: entries, then per entry its lexeme (NUL-terminated), its count of positions and the positions (weight D: the bare number). */
  private tsvector(lexemes: IndexLexemes): void {
    const start = this.length;
    this.int32(0);
    this.int32(lexemes.size);
    for (const [lexeme, positions] of lexemes) {
      this.reserve(lexeme.length * 3 + 3 + positions.length * 2);
      const written = this.buffer.write(lexeme, this.length, 'utf8');
      if (written > MAX_LEXEME_BYTES) throw new Error(`lexeme of ${written} bytes`);
      this.length += written;
      this.buffer[this.length++] = 0;
      this.buffer.writeUInt16BE(positions.length, this.length);
      this.length += 2;
      for (const position of positions) {
        this.buffer.writeUInt16BE(position, this.length);
        this.length += 2;
      }
    }
    this.buffer.writeInt32BE(this.length - start - 4, start);
  }

  private uuid(value: string): void {
    this.int32(16);
    this.reserve(16);
    const hex = value.length === 36 ? value.slice(0, 8) + value.slice(9, 13) + value.slice(14, 18) + value.slice(19, 23) + value.slice(24) : '';
    if (this.buffer.write(hex, this.length, 'hex') !== 16) throw new Error(`not a uuid: ${value}`);
    this.length += 16;
  }

  private text(value: string): void {
    this.reserve(4 + value.length * 3);
    const written = this.buffer.write(value, this.length + 4, 'utf8');
    this.buffer.writeInt32BE(written, this.length);
    this.length += 4 + written;
  }

  private int16(value: number): void {
    this.reserve(2);
    this.buffer.writeInt16BE(value, this.length);
    this.length += 2;
  }

  private int32(value: number): void {
    this.reserve(4);
    this.buffer.writeInt32BE(value, this.length);
    this.length += 4;
  }

  private bytes(value: Buffer): void {
    this.reserve(value.length);
    value.copy(this.buffer, this.length);
    this.length += value.length;
  }

  private reserve(bytes: number): void {
    if (this.length + bytes <= this.buffer.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, this.length + bytes));
    this.buffer.copy(grown, 0, 0, this.length);
    this.buffer = grown;
  }
}
