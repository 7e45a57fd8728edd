import type { EntityManager } from '@mikro-orm/postgresql';
import type { Knex } from '@mikro-orm/postgresql';
import { from as copyFrom } from 'pg-copy-streams';
import { sqlRows, sqlRun, type SqlRunner } from '../db/sql.ts';
import { INDEX_COLUMNS, IndexRowsCopy, type IndexRow } from './copy-rows.ts';
import type { SearchQuery, SearchTerm } from './query.ts';
import { quoteLexeme } from './text.ts';

/** The search index's SQL: the indexer's reads and writes, the hits, their count, the watermark. */

/** Hands out the `$n` placeholder of a value added to a statement. */
export type AddValue = (value: unknown) => string;

/** A term as tsquery text: its lexeme, or its lexemes as a phrase at their distances (`a <-> b`, `a <2> b`). */
function termQuery(term: SearchTerm): string {
  const last = term.lexemes.length - 1;
  const parts = term.lexemes.map(({ lexeme, distance }, i) =>
    `${i === 0 ? '' : ` <${distance}> `}${quoteLexeme(lexeme)}${term.prefix && i === last ? ':*' : ''}`,
  );
  return parts.length === 1 ? parts[0]! : `(${parts.join('')})`;
}

/** The tsquery of a whole query: every term, the excluded ones negated. */
export function tsqueryOf(query: SearchQuery): string {
  return query.terms.map((term) => (term.excluded ? `!${termQuery(term)}` : termQuery(term))).join(' & ');
}

/**
 * The condition an `event_search` row (alias `s`) meets when it matches `query`: one tsquery over the
 * GIN index (phrases are checked against the row's positions, on the rows the index found).
 */
export function searchCondition(query: SearchQuery, add: AddValue, alias = 's'): string {
  return `${alias}.lexemes @@ ${add(tsqueryOf(query))}::tsquery`;
}

/** Filters of a search over an owner's events. */
export interface HitFilter {
  kinds: string[];
  sources: string[];
  conversationId: string | null;
  since: string | null;
  until: string | null;
}

class SqlValues {
  readonly values: unknown[] = [];
  readonly add: AddValue = (value) => {
    this.values.push(value);
    return `$${this.values.length}`;
  };
}

function hitConditions(ownerId: string, query: SearchQuery, filter: HitFilter, values: SqlValues): string[] {
  const { add } = values;
  const conditions = [`s.owner_id = ${add(ownerId)}::uuid`, searchCondition(query, add)];
  if (filter.kinds.length > 0) conditions.push(`s.kind = any(${add(filter.kinds)}::text[])`);
  if (filter.sources.length > 0) conditions.push(`s.source = any(${add(filter.sources)}::text[])`);
  if (filter.conversationId !== null) conditions.push(`s.conversation_id = ${add(filter.conversationId)}::uuid`);
  if (filter.since !== null) conditions.push(`s.event_time >= ${add(filter.since)}::timestamptz`);
  if (filter.until !== null) conditions.push(`s.event_time <= ${add(filter.until)}::timestamptz`);
  return conditions;
}

export interface HitRow {
  ordinal: string;
  conversation_id: string;
  conversation_title: string | null;
  seq: number;
  kind: string;
  event_id: string;
  timestamp: string;
  payload: string;
}

/** The statement of one page of hits, newest (last indexed) first, below `before` when given. */
export function hitPageQuery(ownerId: string, query: SearchQuery, filter: HitFilter, limit: number, before?: string): [string, unknown[]] {
  const values = new SqlValues();
  const conditions = hitConditions(ownerId, query, filter, values);
  if (before !== undefined) conditions.push(`s.ordinal < ${values.add(before)}::bigint`);
  return [
    `select h.ordinal::text as ordinal, h.conversation_id, c.title_search as conversation_title, h.seq, h.kind, e.event_id,
       to_char(h.event_time at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as timestamp, e.payload::text as payload
     from (select s.ordinal, s.conversation_id, s.seq, s.kind, s.event_time from event_search s
           where ${conditions.join(' and ')}
           order by s.ordinal desc limit ${values.add(limit)}) h
       join conversation_events e on e.conversation_id = h.conversation_id and e.seq = h.seq
       join conversations c on c.id = h.conversation_id
     order by h.ordinal desc`,
    values.values,
  ];
}

export function hitPage(em: EntityManager, ownerId: string, query: SearchQuery, filter: HitFilter, limit: number, before?: string): Promise<HitRow[]> {
  return sqlRows<HitRow>(em, ...hitPageQuery(ownerId, query, filter, limit, before));
}

export function hitCountQuery(ownerId: string, query: SearchQuery, filter: HitFilter): [string, unknown[]] {
  const values = new SqlValues();
  return [`select count(*)::integer as count from event_search s where ${hitConditions(ownerId, query, filter, values).join(' and ')}`, values.values];
}

export async function hitCount(em: EntityManager, ownerId: string, query: SearchQuery, filter: HitFilter): Promise<number> {
  const [row] = await sqlRows<{ count: number }>(em, ...hitCountQuery(ownerId, query, filter));
  return row!.count;
}

/**
 * Until when the index is complete for an owner (or one conversation): the time the oldest event not
 * yet indexed was received, or now when every stored event is indexed.
 */
export async function indexedThrough(em: EntityManager, ownerId: string | null, conversationId: string | null): Promise<string> {
  const [row] = await sqlRows<{ through: string }>(
    em,
    `select to_char(coalesce(min(e.received_at), now()) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as through
     from conversations c join conversation_events e on e.conversation_id = c.id and e.seq = c.search_from
     where c.search_from is not null and ($1::uuid is null or c.owner_id = $1::uuid) and ($2::uuid is null or c.id = $2::uuid)`,
    [ownerId, conversationId],
  );
  return row!.through;
}

/**
 * A conversation with events waiting to be indexed: `from_seq` to `to_seq`; none (`to_seq < from_seq`) when
 * its mark is behind what the index holds already (the webhook held the conversation when the mark was to move).
 */
export interface PendingRange {
  id: string;
  owner_id: string;
  from_seq: number;
  to_seq: number;
}

/** Takes the indexer's lock for this transaction; false when another instance holds it. */
export async function tryLockIndexer(trx: SqlRunner, lockId: number): Promise<boolean> {
  const [row] = await sqlRows<{ locked: boolean }>(trx, 'select pg_try_advisory_xact_lock($1) as locked', [lockId]);
  return row!.locked;
}

/**
 * Conversations with events not indexed yet, from the one after `after` in id order (wrapping round),
 * `perConversation` events of each at most. What is owed starts after the last index row (one probe of
 * the primary key): the index is its own watermark, the mark `search_from` only a lower bound.
 */
export function pendingRanges(trx: SqlRunner, after: string | null, conversations: number, perConversation: number): Promise<PendingRange[]> {
  return sqlRows<PendingRange>(
    trx,
    `select p.id, p.owner_id, f.from_seq, least(p.event_count, f.from_seq + $2 - 1) as to_seq
     from ((select 1 as round, c.id, c.owner_id, c.search_from, c.event_count
            from conversations c where c.search_from is not null and ($3::uuid is null or c.id > $3::uuid) order by c.id limit $1)
           union all
           (select 2, c.id, c.owner_id, c.search_from, c.event_count
            from conversations c where c.search_from is not null and $3::uuid is not null and c.id <= $3::uuid order by c.id limit $1)
           limit $1) p
     left join lateral (select s.seq from event_search s where s.conversation_id = p.id order by s.seq desc limit 1) last on true
     cross join lateral (select greatest(p.search_from, coalesce(last.seq, 0) + 1) as from_seq) f
     order by p.round, p.id`,
    [conversations, perConversation, after],
  );
}

export interface PendingEvent {
  conversation_id: string;
  seq: number;
  kind: string;
  source: string | null;
  /** event_time in microseconds since the Unix epoch, as text (exact; a Date keeps milliseconds). */
  event_micros: string;
  payload: string;
}

export function pendingEvents(trx: SqlRunner, ranges: readonly PendingRange[]): Promise<PendingEvent[]> {
  return sqlRows<PendingEvent>(
    trx,
    `select e.conversation_id, e.seq, e.kind, e.source, (extract(epoch from e.event_time) * 1000000)::bigint::text as event_micros,
       e.payload::text as payload
     from unnest($1::uuid[], $2::integer[], $3::integer[]) r(id, from_seq, to_seq)
     -- A primary-key probe per range whatever the statistics say ("offset 0" keeps it one): a table grown fast and
     -- not analysed yet was scanned whole per call.
     cross join lateral (
       select e.* from conversation_events e where e.conversation_id = r.id and e.seq between r.from_seq and r.to_seq offset 0
     ) e
     order by e.received_at, e.conversation_id, e.seq`,
    [ranges.map((r) => r.id), ranges.map((r) => r.from_seq), ranges.map((r) => r.to_seq)],
  );
}

/** The index rows of events, in the order they were received (their ordinals, so hits come newest first), by a binary COPY. */
export async function copyIndexRows(trx: Knex.Transaction, rows: readonly IndexRow[]): Promise<void> {
  const copy = new IndexRowsCopy();
  for (const row of rows) copy.add(row);
  const connection = await trx.client.acquireConnection();
  try {
    const stream = connection.query(copyFrom(`copy event_search ${INDEX_COLUMNS} from stdin (format binary)`));
    await new Promise<void>((resolve, reject) => {
      stream.on('error', reject);
      stream.on('finish', resolve);
      stream.end(copy.finish());
    });
  } finally {
    trx.client.releaseConnection(connection);
  }
}

/** A conversation's mark to move: every event up to `through` is in the index. */
export interface IndexedThrough {
  id: string;
  through: number;
}

/**
 * Moves each conversation's mark past what the index holds (cleared when it has caught up), in the index
 * rows' transaction. A row the webhook has locked is skipped, not waited for: waiting would hold the
 * rows locked before it, and the webhook's requests behind them; its mark stays a lower bound, moved next time.
 */
export function moveMarks(trx: SqlRunner, marks: readonly IndexedThrough[]): Promise<number> {
  return sqlRun(
    trx,
    `update conversations c set search_from = case when c.event_count > r.through then r.through + 1 end
     from unnest($1::uuid[], $2::integer[]) r(id, through)
     where c.id = r.id and c.search_from <= r.through + 1
       and c.id in (select l.id from conversations l where l.id = any($1::uuid[]) for no key update skip locked)`,
    [marks.map((m) => m.id), marks.map((m) => m.through)],
  );
}
