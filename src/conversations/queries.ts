import type { EntityManager } from '@mikro-orm/postgresql';
import { sqlRows, sqlRun, type SqlRunner } from '../db/sql.ts';
import type { ConversationViewRow, StoredEventRow } from './mapper.ts';
import { searchCondition } from '../search/queries.ts';
import type { ConversationFilter, ConversationPosition, ConversationSort, EventFilter, EventOrder } from './search.ts';

/** The conversations' SQL: the webhook's group write, the reads and their filters, the info's upsert. */

/** The columns of a conversation's view (`c` the conversation, `i` its info); instants as text with microseconds, so a sort key survives a cursor. */
export const CONVERSATION_VIEW_COLUMNS = `c.id, c.owner_id, c.execution_status, c.event_count,
  c.created_at, c.updated_at, c.last_event_at, c.renamed_title, c.parent_conversation_id, c.tags::text as tags,
  i.title::text as info_title, i.metrics::text as metrics, i.forked_from_conversation_id,
  (select coalesce(sum(s.charged_micro_usd), 0) from spend_usages s where s.conversation_id = c.id)::text as cost_micro_usd,
  (select count(*) from conversation_events u where u.conversation_id = c.id and u.unrecognized is not null)::integer as unrecognized_event_count`;

const CONVERSATION_VIEW_FROM = 'conversations c left join conversation_infos i on i.conversation_id = c.id';

/** The columns of a `StoredEventRow`, formatted by PostgreSQL (cheaper than a Date per row). */
const STORED_EVENT_COLUMNS = `seq, to_char(received_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as received_at, payload::text as payload,
  unrecognized::text as unrecognized`;

/** A group of webhook batches as `ingest_event_batches` takes them (src/db/functions/ingest_event_batches.sql). */
export interface BatchGroup {
  conversations: string[];
  owners: string[];
  eventBatches: number[];
  eventIds: string[];
  kinds: string[];
  statuses: (string | null)[];
  payloads: Buffer[];
  deltaBatches: number[];
  deltas: string[];
  eventTimes: (string | null)[];
  sources: (string | null)[];
  /** Each event's `unrecognized` marker (JSON text, `null` for a known event); absent when no batch of the group has one. */
  markers?: Buffer[];
}

/** One outcome per batch (`batch` its 1-based position in the group). */
export interface BatchRow {
  batch: number;
  owner_id: string;
  stored: number;
}

/** Stores a group of webhook batches: one round trip, its own transaction, a statement prepared once per connection. */
export function ingestEventBatches(em: EntityManager, group: BatchGroup): Promise<BatchRow[]> {
  return sqlRows<BatchRow>(
    em,
    'select batch, owner_id, stored from ingest_event_batches($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)',
    [
      group.conversations,
      group.owners,
      group.eventBatches,
      group.eventIds,
      group.kinds,
      group.statuses,
      jsonArray(group.payloads),
      group.deltaBatches,
      group.deltas,
      group.eventTimes,
      group.sources,
      group.markers ? jsonArray(group.markers) : null,
    ],
    'ingest_event_batches',
  );
}

/**
 * `[` + the payloads joined by commas + `]`: the group's payloads as one `json` parameter, nothing
 * escaped (a Buffer goes in binary format, which for `json` is that same text).
 */
export function jsonArray(payloads: readonly Buffer[]): Buffer {
  let length = 2 + Math.max(payloads.length - 1, 0);
  for (const payload of payloads) length += payload.length;
  const array = Buffer.allocUnsafe(length);
  let at = 0;
  array[at++] = 0x5b; // [
  payloads.forEach((payload, i) => {
    if (i > 0) array[at++] = 0x2c; // ,
    at += payload.copy(array, at);
  });
  array[at] = 0x5d; // ]
  return array;
}

/** A conversation's owner and event count, or undefined when there is none. */
export async function conversationOwner(em: EntityManager, id: string): Promise<{ id: string; owner_id: string; event_count: number } | undefined> {
  const [row] = await sqlRows<{ id: string; owner_id: string; event_count: number }>(
    em,
    'select id, owner_id, event_count from conversations where id = $1',
    [id],
  );
  return row;
}

/** Sets the owner's title; false when `ownerId` owns no such conversation. */
export async function renameConversation(em: EntityManager, id: string, ownerId: string, title: string, titleSearch: string | null): Promise<boolean> {
  const renamed = await sqlRun(
    em,
    `update conversations set renamed_title = $2, title_search = $3, updated_at = now()
     where id = $1 and owner_id = $4`,
    [id, title, titleSearch, ownerId],
  );
  return renamed > 0;
}

/** The rows of one page of events (`limit` rows at most). */
export function eventPage(em: EntityManager, conversationId: string, filter: EventFilter, order: EventOrder, limit: number): Promise<StoredEventRow[]> {
  return sqlRows<StoredEventRow>(em, ...eventPageQuery(conversationId, filter, order, limit));
}

/** How many of a conversation's events match `filter`. */
export async function eventCount(em: EntityManager, conversationId: string, filter: EventFilter): Promise<number> {
  const [row] = await sqlRows<{ count: number }>(em, ...eventCountQuery(conversationId, filter));
  return row!.count;
}

/** One stored event by its id. */
export async function storedEvent(em: EntityManager, conversationId: string, eventId: string): Promise<StoredEventRow | undefined> {
  const [row] = await sqlRows<StoredEventRow>(
    em,
    `select ${STORED_EVENT_COLUMNS} from conversation_events where conversation_id = $1 and event_id = $2`,
    [conversationId, eventId],
  );
  return row;
}

/** The rows of one page of an owner's conversations, each with its sort key. */
export function conversationPage(
  em: EntityManager,
  ownerId: string,
  filter: ConversationFilter,
  sort: ConversationSort,
  limit: number,
  after?: ConversationPosition,
): Promise<(ConversationViewRow & { sort_key: string })[]> {
  return sqlRows(em, ...conversationPageQuery(ownerId, filter, sort, limit, after));
}

/** How many of an owner's conversations match `filter`. */
export async function conversationCount(em: EntityManager, ownerId: string, filter: ConversationFilter): Promise<number> {
  const [row] = await sqlRows<{ count: number }>(em, ...conversationCountQuery(ownerId, filter));
  return row!.count;
}

/** One conversation's view row, whoever owns it. */
export async function conversationViewRow(em: EntityManager, id: string): Promise<ConversationViewRow | undefined> {
  const [row] = await sqlRows<ConversationViewRow>(em, `select ${CONVERSATION_VIEW_COLUMNS} from ${CONVERSATION_VIEW_FROM} where c.id = $1`, [id]);
  return row;
}

/** The ids of `ownerId`'s conversations naming each of `ids` as their parent, oldest first. */
export function subConversationRows(em: EntityManager, ownerId: string, ids: string[]): Promise<{ parent: string; ids: string[] }[]> {
  return sqlRows(
    em,
    `select parent_conversation_id as parent, array_agg(id order by created_at, id) as ids from conversations
     where parent_conversation_id = any($1::uuid[]) and owner_id = $2 group by parent_conversation_id`,
    [ids, ownerId],
  );
}

/** The stored ConversationInfo's text, if any. */
export async function conversationInfoText(em: EntityManager, conversationId: string): Promise<string | undefined> {
  const [row] = await sqlRows<{ info: string }>(em, 'select info::text as info from conversation_infos where conversation_id = $1', [conversationId]);
  return row?.info;
}

/**
 * The `COPY … TO STDOUT (FORMAT binary)` of one export page: events after `after` up to `lastSeq`, at most
 * `rows` of them and about `pageBytes` as stored (at least one), counted before the payload is read out
 * (pg_column_size does not detoast). COPY takes no parameters: the caller checks `conversationId` is a UUID.
 */
export function exportPageCopy(conversationId: string, after: number, lastSeq: number, rows: number, pageBytes: number): string {
  return `copy (
    select seq, floor(extract(epoch from received_at) * 1000)::float8, payload::text, unrecognized::text from (
      select seq, received_at, payload, unrecognized,
        sum(pg_column_size(payload)) over (order by seq rows unbounded preceding) - pg_column_size(payload) as before_bytes
      from conversation_events
      where conversation_id = '${conversationId}' and seq > ${Math.trunc(after)} and seq <= ${Math.trunc(lastSeq)}
      order by seq limit ${Math.trunc(rows)}) page
    where before_bytes < ${Math.trunc(pageBytes)} or seq = ${Math.trunc(after) + 1}
    order by seq) to stdout (format binary)`;
}

/**
 * Shows `metrics` (JSON text) on the conversation, creating its info row when the agent-server has
 * sent none yet (`info` JSON null: the export still says there is none).
 */
export function storeMetrics(em: EntityManager, conversationId: string, metrics: string): Promise<number> {
  return sqlRun(
    em,
    `insert into conversation_infos (conversation_id, metrics, info) values ($1, $2::json, 'null'::json)
     on conflict (conversation_id) do update set metrics = excluded.metrics`,
    [conversationId, metrics],
  );
}

/** Creates the conversation for `ownerId` unless it exists, then locks it; returns whether it was created and its owner. */
export async function createAndLockConversation(trx: SqlRunner, id: string, ownerId: string): Promise<{ created: boolean; ownerId: string }> {
  const created = await sqlRun(
    trx,
    `insert into conversations (id, owner_id, created_at, updated_at)
     values ($1, $2, date_trunc('milliseconds', now()), now())
     on conflict (id) do nothing`,
    [id, ownerId],
  );
  const [owner] = await sqlRows<{ owner_id: string }>(trx, 'select owner_id from conversations where id = $1 for update', [id]);
  return { created: created > 0, ownerId: owner!.owner_id };
}

/** The agent-server's stored title (JSON text), if any. */
export async function storedInfoTitle(trx: SqlRunner, id: string): Promise<string | null | undefined> {
  const [previous] = await sqlRows<{ title: string | null }>(trx, 'select title::text as title from conversation_infos where conversation_id = $1', [id]);
  return previous?.title;
}

/** A ConversationInfo as stored (JSON as text). */
export interface StoredInfo {
  title: string | null;
  metrics: string | null;
  info: string;
  updatedAt: string | null;
  forkedFrom: string | null;
}

/** Stores the info unless a newer one (by the agent-server's `updated_at`) is stored; false when it was stale. */
export async function upsertInfo(trx: SqlRunner, id: string, info: StoredInfo): Promise<boolean> {
  const applied = await sqlRun(
    trx,
    `insert into conversation_infos as stored (conversation_id, title, metrics, info, info_updated_at, forked_from_conversation_id)
     values ($1, $2::json, $3::json, $4::json, $5::timestamptz, $6::uuid)
     on conflict (conversation_id) do update set
       title = excluded.title, metrics = excluded.metrics, info = excluded.info,
       info_updated_at = excluded.info_updated_at, received_at = now(),
       forked_from_conversation_id = excluded.forked_from_conversation_id
     where stored.info_updated_at is null or excluded.info_updated_at is null
       or excluded.info_updated_at >= stored.info_updated_at`,
    [id, info.title, info.metrics, info.info, info.updatedAt, info.forkedFrom],
  );
  return applied > 0;
}

/** What an applied info sets on its conversation. */
export interface InfoColumns {
  executionStatus: string | null;
  /** The agent-server changed its title: the owner's rename gives way. */
  titleChanged: boolean;
  titleSearch: string | null;
  parentConversationId: string | null;
  tags: string | null;
}

export async function applyInfoToConversation(trx: SqlRunner, id: string, columns: InfoColumns): Promise<void> {
  await sqlRun(
    trx,
    `update conversations set execution_status = coalesce($1, execution_status), updated_at = now(),
       renamed_title = case when $2::boolean then null else renamed_title end,
       title_search = case when $2::boolean or renamed_title is null then $3 else title_search end,
       parent_conversation_id = $4::uuid, tags = $5::jsonb
     where id = $6`,
    [columns.executionStatus, columns.titleChanged, columns.titleSearch, columns.parentConversationId, columns.tags, id],
  );
}

/** The statement counting a conversation's events that match `filter`. */
export function eventCountQuery(conversationId: string, filter: EventFilter): [string, unknown[]] {
  const values = new SqlValues();
  const conditions = [`conversation_id = ${values.add(conversationId)}`, ...eventConditions(filter, values)];
  return [`select count(*)::integer as count from conversation_events where ${conditions.join(' and ')}`, values.values];
}

/** The statement of one page of an owner's conversations, after `after` when given. */
export function conversationPageQuery(
  ownerId: string,
  filter: ConversationFilter,
  sort: ConversationSort,
  limit: number,
  after?: ConversationPosition,
): [string, unknown[]] {
  const values = new SqlValues();
  const conditions = [`c.owner_id = ${values.add(ownerId)}`, ...conversationConditions(filter, values)];
  const column = sort === 'updated_desc' ? 'c.updated_at' : 'c.created_at';
  const direction = sort === 'created_asc' ? 'asc' : 'desc';
  if (after) {
    // A row comparison: the index (owner_id, created_at desc, id desc) seeks straight to it.
    conditions.push(`(${column}, c.id) ${direction === 'asc' ? '>' : '<'} (${values.add(after.key)}::timestamptz, ${values.add(after.id)}::uuid)`);
  }
  // The page is chosen from conversations alone, then joined with the infos of its rows only.
  return [
    `select ${CONVERSATION_VIEW_COLUMNS},
       to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as sort_key
     from (select * from conversations c
           where ${conditions.join(' and ')}
           order by ${column} ${direction}, c.id ${direction}
           limit ${values.add(limit)}) c
       left join conversation_infos i on i.conversation_id = c.id
     order by ${column} ${direction}, c.id ${direction}`,
    values.values,
  ];
}

/** The statement counting an owner's conversations that match `filter`. */
export function conversationCountQuery(ownerId: string, filter: ConversationFilter): [string, unknown[]] {
  const values = new SqlValues();
  const conditions = [`c.owner_id = ${values.add(ownerId)}`, ...conversationConditions(filter, values)];
  return [`select count(*)::integer as count from conversations c where ${conditions.join(' and ')}`, values.values];
}

/**
 * The statement of one page of events. Several kinds: one index range per kind, each already in
 * seq order, merged (a single `kind = any(…)` range would have to be sorted whole).
 */
export function eventPageQuery(conversationId: string, filter: EventFilter, order: EventOrder, limit: number): [string, unknown[]] {
  const values = new SqlValues();
  const conversation = values.add(conversationId);
  const rowLimit = values.add(limit);
  const select = (f: EventFilter) =>
    `select ${STORED_EVENT_COLUMNS} from conversation_events
     where ${[`conversation_id = ${conversation}`, ...eventConditions(f, values)].join(' and ')}
     order by seq ${order} limit ${rowLimit}`;
  if (filter.kinds.length <= 1) return [select(filter), values.values];
  const parts = filter.kinds.map((kind) => `(${select({ ...filter, kinds: [kind] })})`);
  return [`select * from (${parts.join(' union all ')}) e order by seq ${order} limit ${rowLimit}`, values.values];
}

/** `text` for a LIKE pattern that matches it literally. */
export function likeLiteral(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/** Collects the values of a statement and hands out their `$n` placeholders. */
class SqlValues {
  readonly values: unknown[] = [];
  add(value: unknown): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }
}

/** The SQL conditions of an event filter (besides the conversation), with their values added to `values`. */
function eventConditions(filter: EventFilter, values: SqlValues): string[] {
  const conditions: string[] = [];
  if (filter.afterSeq > 0) conditions.push(`seq > ${values.add(filter.afterSeq)}`);
  if (filter.beforeSeq !== null) conditions.push(`seq < ${values.add(filter.beforeSeq)}`);
  if (filter.kinds.length === 1) conditions.push(`kind = ${values.add(filter.kinds[0])}`);
  else if (filter.kinds.length > 1) conditions.push(`kind = any(${values.add(filter.kinds)}::text[])`);
  if (filter.ids?.length === 1) conditions.push(`event_id = ${values.add(filter.ids[0])}`);
  else if (filter.ids) conditions.push(`event_id = any(${values.add(filter.ids)}::text[])`);
  if (filter.sources.length === 1) conditions.push(`source = ${values.add(filter.sources[0])}`);
  else if (filter.sources.length > 1) conditions.push(`source = any(${values.add(filter.sources)}::text[])`);
  if (filter.since !== null) conditions.push(`event_time >= ${values.add(filter.since)}::timestamptz`);
  if (filter.until !== null) conditions.push(`event_time <= ${values.add(filter.until)}::timestamptz`);
  if (filter.q !== null) {
    // Through the index rows of this conversation (their primary key), not the whole index.
    conditions.push(`exists (select 1 from event_search s where s.conversation_id = conversation_events.conversation_id
      and s.seq = conversation_events.seq and ${searchCondition(filter.q, (value) => values.add(value))})`);
  }
  return conditions;
}

/** The SQL conditions of a conversation filter (alias `c`), besides the owner. */
function conversationConditions(filter: ConversationFilter, values: SqlValues): string[] {
  const conditions: string[] = [];
  if (filter.q !== null) conditions.push(`c.title_search ilike ${values.add(`%${likeLiteral(filter.q)}%`)}`);
  if (filter.statuses.length > 0) conditions.push(`c.execution_status = any(${values.add(filter.statuses)}::text[])`);
  if (filter.createdSince !== null) conditions.push(`c.created_at >= ${values.add(filter.createdSince)}::timestamptz`);
  if (filter.createdUntil !== null) conditions.push(`c.created_at <= ${values.add(filter.createdUntil)}::timestamptz`);
  if (filter.updatedSince !== null) conditions.push(`c.updated_at >= ${values.add(filter.updatedSince)}::timestamptz`);
  if (filter.updatedUntil !== null) conditions.push(`c.updated_at <= ${values.add(filter.updatedUntil)}::timestamptz`);
  if (filter.tags.length > 0) {
    conditions.push(`c.tags @> ${values.add(JSON.stringify(Object.fromEntries(filter.tags)))}::jsonb`);
    // Two values of one key cannot both match: `@>` of the object above would keep only the last.
    if (new Set(filter.tags.map(([key]) => key)).size < filter.tags.length) conditions.push('false');
  }
  if (filter.parentConversationId !== null) conditions.push(`c.parent_conversation_id = ${values.add(filter.parentConversationId)}::uuid`);
  return conditions;
}
