import { sqlRows, sqlRun, type SqlRunner } from '../db/sql.ts';
import type { DeliveryRow } from './attempt.ts';
import type { AttemptRow, EndpointRow, MessageRow } from './mapper.ts';

/** Outbound webhooks' SQL: endpoints, the outbox's fan-out, deliveries and their attempts. */

/** The columns of a `MessageRow`, from `webhook_deliveries d join webhook_messages m`. */
const DELIVERY_SELECT = `select m.id, d.endpoint_id, m.type, m.data, d.state, d.attempts, d.last_status_code, d.last_error,
  d.next_attempt_at, m.created_at from webhook_deliveries d join webhook_messages m on m.id = d.message_id`;

// Endpoints

/** Locks the user's row until the transaction ends, so that endpoint counts and inserts are serialized per user. */
export async function lockOwner(trx: SqlRunner, ownerId: string): Promise<void> {
  await sqlRun(trx, 'select 1 from organizations where id = $1 for update', [ownerId]);
}

/** How many endpoints the user has, for the per-user cap. */
export async function countEndpoints(trx: SqlRunner, ownerId: string): Promise<number> {
  const [row] = await sqlRows<{ count: number }>(trx, 'select count(*)::integer as count from webhook_endpoints where owner_id = $1', [ownerId]);
  return row!.count;
}

/** A new endpoint (its secret already encrypted). */
export async function insertEndpoint(
  trx: SqlRunner,
  endpoint: {
    id: string;
    ownerId: string;
    url: string;
    description: string;
    eventTypes: string[] | null;
    conversationId: string | null;
    conversationIds: string[] | null;
    tags: Record<string, string> | null;
    headers: string | null;
    rateLimit: number | null;
    secret: string;
  },
): Promise<EndpointRow> {
  const [row] = await sqlRows<EndpointRow>(
    trx,
    `insert into webhook_endpoints (id, owner_id, url, description, event_types, conversation_id, conversation_ids, tags, headers, secret, rate_limit)
     values ($1, $2, $3, $4, $5::text[], $6, $7::uuid[], $8::jsonb, $9, $10, $11) returning *`,
    [
      endpoint.id,
      endpoint.ownerId,
      endpoint.url,
      endpoint.description,
      endpoint.eventTypes,
      endpoint.conversationId,
      endpoint.conversationIds,
      endpoint.tags === null ? null : JSON.stringify(endpoint.tags),
      endpoint.headers,
      endpoint.secret,
      endpoint.rateLimit,
    ],
  );
  return row!;
}

/** The user's endpoints, oldest first. */
export function listEndpoints(on: SqlRunner, ownerId: string): Promise<EndpointRow[]> {
  return sqlRows<EndpointRow>(on, 'select * from webhook_endpoints where owner_id = $1 order by created_at, id', [ownerId]);
}

/** The endpoint if the user owns it. */
export async function findOwnedEndpoint(on: SqlRunner, id: string, ownerId: string): Promise<EndpointRow | undefined> {
  const [row] = await sqlRows<EndpointRow>(on, 'select * from webhook_endpoints where id = $1 and owner_id = $2', [id, ownerId]);
  return row;
}

/**
 * Writes what the owner may change; `clearReason` forgets why it was disabled, `clearFailures` its
 * failures. Undefined when the endpoint is gone.
 */
export async function updateEndpoint(
  trx: SqlRunner,
  change: {
    id: string;
    ownerId: string;
    url: string;
    description: string;
    eventTypes: string[] | null;
    conversationIds: string[] | null;
    tags: Record<string, string> | null;
    headers: string | null;
    rateLimit: number | null;
    disabled: boolean;
    clearReason: boolean;
    clearFailures: boolean;
  },
): Promise<EndpointRow | undefined> {
  const [row] = await sqlRows<EndpointRow>(
    trx,
    `update webhook_endpoints set url = $1, description = $2, event_types = $3::text[], disabled = $4,
       disabled_reason = case when $5 then null else disabled_reason end,
       failing_since = case when $6 then null else failing_since end,
       headers = $9, conversation_ids = $10::uuid[], tags = $11::jsonb, rate_limit = $12,
       updated_at = now()
     where id = $7 and owner_id = $8 returning *`,
    [
      change.url,
      change.description,
      change.eventTypes,
      change.disabled,
      change.clearReason,
      change.clearFailures,
      change.id,
      change.ownerId,
      change.headers,
      change.conversationIds,
      change.tags === null ? null : JSON.stringify(change.tags),
      change.rateLimit,
    ],
  );
  return row;
}

/** Deletes the user's endpoint (its deliveries and attempts go with it). */
export async function deleteEndpoint(trx: SqlRunner, id: string, ownerId: string): Promise<void> {
  await sqlRun(trx, 'delete from webhook_endpoints where id = $1 and owner_id = $2', [id, ownerId]);
}

/** Moves the current secret to `previous_secret` for `overlapMs` and stores the new one; undefined when the endpoint is gone. */
export async function rotateEndpointSecret(
  trx: SqlRunner,
  rotation: { id: string; ownerId: string; secret: string; overlapMs: number },
): Promise<EndpointRow | undefined> {
  const [row] = await sqlRows<EndpointRow>(
    trx,
    `update webhook_endpoints set previous_secret = secret, previous_secret_until = now() + ($1 * interval '1 millisecond'),
       secret = $2, updated_at = now()
     where id = $3 and owner_id = $4 returning *`,
    [rotation.overlapMs, rotation.secret, rotation.id, rotation.ownerId],
  );
  return row;
}

// Messages and deliveries

/** A `webhook.test` message, fanned out already: its one delivery is inserted by `insertTestDelivery`. */
export async function insertTestMessage(trx: SqlRunner, message: { id: string; ownerId: string; data: Record<string, unknown> }): Promise<void> {
  await sqlRun(trx, `insert into webhook_messages (id, owner_id, type, data, fanned_out) values ($1, $2, 'webhook.test', $3::jsonb, true)`, [
    message.id,
    message.ownerId,
    JSON.stringify(message.data),
  ]);
}

/** The delivery of a test message to its one endpoint, due now. */
export async function insertTestDelivery(trx: SqlRunner, endpointId: string, messageId: string): Promise<void> {
  await sqlRun(
    trx,
    `insert into webhook_deliveries (message_id, endpoint_id, next_attempt_at, created_at)
     select id, $1, now(), created_at from webhook_messages where id = $2`,
    [endpointId, messageId],
  );
}

/** One message at one endpoint. */
export async function findDelivery(on: SqlRunner, messageId: string, endpointId: string): Promise<MessageRow | undefined> {
  const [row] = await sqlRows<MessageRow>(on, `${DELIVERY_SELECT} where d.message_id = $1 and d.endpoint_id = $2`, [messageId, endpointId]);
  return row;
}

/**
 * Which of an endpoint's messages: the message log's filters, and the set a recovery or a bulk retry
 * re-sends. `since` and `until` bound the messages' `created_at` as `[since, until)`.
 */
export interface DeliveryFilter {
  status?: 'pending' | 'succeeded' | 'failed' | null;
  eventType?: string | null;
  conversationId?: string | null;
  since?: string | Date | null;
  until?: string | Date | null;
}

/** The filter as conditions on `d` (webhook_deliveries) and `m` (webhook_messages); its values are appended to `params`. */
function deliveryConditions(filter: DeliveryFilter, params: unknown[]): string {
  const conditions: string[] = [];
  const add = (column: string, operator: string, value: unknown) => {
    params.push(value);
    conditions.push(` and ${column} ${operator} $${params.length}`);
  };
  if (filter.status) add('d.state', '=', filter.status);
  if (filter.eventType) add('m.type', '=', filter.eventType);
  if (filter.conversationId) add('m.conversation_id', '=', filter.conversationId);
  if (filter.since) add('d.created_at', '>=', filter.since);
  if (filter.until) add('d.created_at', '<', filter.until);
  return conditions.join('');
}

/** A page of the endpoint's messages matching `filter`, newest first, after the message `after` (keyset); `limit` rows at most. */
export function listDeliveries(on: SqlRunner, endpointId: string, page: { after?: string; limit: number; filter?: DeliveryFilter }): Promise<MessageRow[]> {
  const params: unknown[] = [endpointId, page.limit];
  const keyset = page.after
    ? ` and (d.created_at, d.message_id) < (select c.created_at, c.message_id from webhook_deliveries c where c.endpoint_id = $1 and c.message_id = $${params.push(page.after)})`
    : '';
  const conditions = deliveryConditions(page.filter ?? {}, params);
  return sqlRows<MessageRow>(on, `${DELIVERY_SELECT} where d.endpoint_id = $1${keyset}${conditions} order by d.created_at desc, d.message_id desc limit $2`, params);
}

/** The attempts of one message at one endpoint, in order. */
export function listAttempts(on: SqlRunner, messageId: string, endpointId: string): Promise<AttemptRow[]> {
  return sqlRows<AttemptRow>(on, 'select * from webhook_attempts where message_id = $1 and endpoint_id = $2 order by attempt', [messageId, endpointId]);
}

/** Makes the delivery pending and due now; returns the attempts it has had (undefined when it is gone). */
export async function markDeliveryPending(trx: SqlRunner, messageId: string, endpointId: string): Promise<number | undefined> {
  const [row] = await sqlRows<{ attempts: number }>(
    trx,
    `update webhook_deliveries set state = 'pending', next_attempt_at = now() where message_id = $1 and endpoint_id = $2 returning attempts`,
    [messageId, endpointId],
  );
  return row?.attempts;
}

/** The deliveries of a message (or of it to one endpoint, when `endpointId` is given) with what an attempt needs of their endpoints. */
export function deliveryTargets(on: SqlRunner, messageId: string, endpointId: string | null): Promise<DeliveryRow[]> {
  return deliveryTargetsOf(on, [{ messageId, endpointId }]);
}

/** `deliveryTargets` of several jobs in one statement: each delivery once, however many of the jobs name it. */
export function deliveryTargetsOf(on: SqlRunner, jobs: readonly { messageId: string; endpointId: string | null }[]): Promise<DeliveryRow[]> {
  return sqlRows<DeliveryRow>(
    on,
    `select distinct on (q.id, q.endpoint_id) q.*, e.owner_id, e.url, e.headers, e.rate_limit, e.secret, e.previous_secret, e.previous_secret_until, e.disabled
     from unnest($1::text[], $2::uuid[]) as j(message_id, endpoint_id)
     join (${DELIVERY_SELECT}) q on q.id = j.message_id and (j.endpoint_id is null or q.endpoint_id = j.endpoint_id)
     join webhook_endpoints e on e.id = q.endpoint_id`,
    [jobs.map((j) => j.messageId), jobs.map((j) => j.endpointId)],
  );
}

/** A conversation's stored events `fromSeq..toSeq`, in order, as their stored JSON text, with their `unrecognized` markers (null for known events). */
export function eventPayloads(
  on: SqlRunner,
  conversationId: string,
  fromSeq: number,
  toSeq: number,
): Promise<{ seq: number; event_id: string; payload: string; unrecognized: string | null }[]> {
  return sqlRows<{ seq: number; event_id: string; payload: string; unrecognized: string | null }>(
    on,
    `select seq, event_id, payload::text as payload, unrecognized::text as unrecognized from conversation_events
     where conversation_id = $1 and seq between $2 and $3 order by seq`,
    [conversationId, fromSeq, toSeq],
  );
}

/** `eventPayloads` of several conversations' ranges in one statement, in order within each conversation. */
export function eventPayloadsOf(
  on: SqlRunner,
  ranges: readonly { conversationId: string; fromSeq: number; toSeq: number }[],
): Promise<{ conversation_id: string; seq: number; event_id: string; payload: string; unrecognized: string | null }[]> {
  return sqlRows<{ conversation_id: string; seq: number; event_id: string; payload: string; unrecognized: string | null }>(
    on,
    `select e.conversation_id, e.seq, e.event_id, e.payload::text as payload, e.unrecognized::text as unrecognized
     from unnest($1::uuid[], $2::integer[], $3::integer[]) as r(conversation_id, from_seq, to_seq)
     -- A primary-key probe per range, as in owedTransactionRuns.
     cross join lateral (
       select e.* from conversation_events e where e.conversation_id = r.conversation_id and e.seq between r.from_seq and r.to_seq offset 0
     ) e
     order by e.conversation_id, e.seq`,
    [ranges.map((r) => r.conversationId), ranges.map((r) => r.fromSeq), ranges.map((r) => r.toSeq)],
  );
}

// Attempts

/** One attempt to record, as its `webhook_attempts` row takes it. */
export interface AttemptInsert {
  messageId: string;
  endpointId: string;
  attempt: number;
  startedAt: string;
  durationMs: number;
  statusCode: number | null;
  error: string | null;
  responseExcerpt: string | null;
}

/** Inserts attempts (of one message or several) in one statement; returns `message_id/endpoint_id` of those inserted (not recorded before). */
export async function insertAttemptRows(trx: SqlRunner, attempts: readonly AttemptInsert[]): Promise<string[]> {
  const rows = await sqlRows<{ message_id: string; endpoint_id: string }>(
    trx,
    `insert into webhook_attempts (message_id, endpoint_id, attempt, started_at, duration_ms, status_code, error, response_excerpt)
     select a.* from unnest($1::text[], $2::uuid[], $3::integer[], $4::timestamptz[], $5::integer[], $6::integer[], $7::text[], $8::text[]) as a
     on conflict do nothing returning message_id, endpoint_id`,
    [
      attempts.map((a) => a.messageId),
      attempts.map((a) => a.endpointId),
      attempts.map((a) => a.attempt),
      attempts.map((a) => a.startedAt),
      attempts.map((a) => a.durationMs),
      attempts.map((a) => a.statusCode),
      attempts.map((a) => a.error),
      attempts.map((a) => a.responseExcerpt),
    ],
  );
  return rows.map((r) => `${r.message_id}/${r.endpoint_id}`);
}

/** What one attempt makes of its delivery. */
export interface DeliveryUpdate {
  messageId: string;
  endpointId: string;
  state: 'succeeded' | 'pending' | 'failed';
  attempt: number;
  statusCode: number | null;
  error: string | null;
  nextAttemptAt: string | null;
}

/** Writes the deliveries' states after their attempts, in one statement (the attempt count never goes back). */
export async function updateDeliveryStates(trx: SqlRunner, updates: readonly DeliveryUpdate[]): Promise<void> {
  await sqlRun(
    trx,
    `update webhook_deliveries d set state = u.state, attempts = greatest(d.attempts, u.attempt), last_status_code = u.status_code,
       last_error = u.error, next_attempt_at = u.next_attempt_at
     from unnest($1::uuid[], $2::text[], $3::integer[], $4::integer[], $5::text[], $6::timestamptz[], $7::text[])
       as u(endpoint_id, state, attempt, status_code, error, next_attempt_at, message_id)
     where d.message_id = u.message_id and d.endpoint_id = u.endpoint_id`,
    [
      updates.map((u) => u.endpointId),
      updates.map((u) => u.state),
      updates.map((u) => u.attempt),
      updates.map((u) => u.statusCode),
      updates.map((u) => u.error),
      updates.map((u) => u.nextAttemptAt),
      updates.map((u) => u.messageId),
    ],
  );
}

/** An endpoint whose state an attempt changed: what its operational message says of it. */
export interface EndpointChange {
  id: string;
  owner_id: string;
  url: string;
  failing_since: Date | null;
}

/** Forgets the failures of endpoints that answered with a success; returns those that were failing (now recovered). */
export function clearEndpointFailures(trx: SqlRunner, endpointIds: readonly string[]): Promise<EndpointChange[]> {
  return sqlRows<EndpointChange>(
    trx,
    `update webhook_endpoints e set failing_since = null from (
       select id, failing_since from webhook_endpoints where id = any ($1::uuid[]) and failing_since is not null order by id for update
     ) was
     where e.id = was.id returning e.id, e.owner_id, e.url, was.failing_since`,
    [endpointIds],
  );
}

/** Disables an endpoint whose receiver answered 410 Gone; returns it when this disabled it (it was enabled). */
export async function disableGoneEndpoint(trx: SqlRunner, endpointId: string): Promise<EndpointChange | undefined> {
  const [row] = await sqlRows<EndpointChange>(
    trx,
    `update webhook_endpoints set disabled = true, disabled_reason = 'The receiver answered 410 Gone', updated_at = now()
     where id = $1 and not disabled returning id, owner_id, url, failing_since`,
    [endpointId],
  );
  return row;
}

/** What a failed attempt did to its endpoint: its first failure after a success, and whether it disabled it. */
export interface EndpointFailure extends EndpointChange {
  first_failure: boolean;
  disabled_now: boolean;
  disabled_reason: string | null;
}

/**
 * A failed attempt started at `startedAt`: the endpoint is failing since its first failure after the
 * last success, and disabled once that is `disableAfterMs` ago.
 */
export async function recordEndpointFailure(trx: SqlRunner, endpointId: string, startedAt: string, disableAfterMs: number): Promise<EndpointFailure | undefined> {
  const [row] = await sqlRows<EndpointFailure>(
    trx,
    `update webhook_endpoints e set failing_since = coalesce(e.failing_since, $1::timestamptz),
       disabled = coalesce(e.failing_since, $1::timestamptz) <= now() - ($2 * interval '1 millisecond'),
       disabled_reason = case when coalesce(e.failing_since, $1::timestamptz) <= now() - ($2 * interval '1 millisecond')
         then 'Every attempt failed for too long' else e.disabled_reason end,
       updated_at = now()
     from (select id, failing_since, disabled from webhook_endpoints where id = $3 for update) was
     where e.id = was.id
     returning e.id, e.owner_id, e.url, e.failing_since, e.disabled_reason,
       was.failing_since is null as first_failure, e.disabled and not was.disabled as disabled_now`,
    [startedAt, disableAfterMs, endpointId],
  );
  return row;
}

/**
 * Stores an operational message about `sourceEndpointId` (endpoint.disabled, …) when another enabled
 * endpoint of the owner lists its type in `event_types`; the fan-out never gives it to its source.
 */
export async function insertOperationalMessage(
  trx: SqlRunner,
  message: { ownerId: string; sourceEndpointId: string; type: string; data: Record<string, unknown> },
): Promise<void> {
  await sqlRun(
    trx,
    `insert into webhook_messages (id, owner_id, type, data, source_endpoint_id)
     select 'msg_' || replace(gen_random_uuid()::text, '-', ''), $1, $2, $3::jsonb, $4
     where exists (select 1 from webhook_endpoints e where e.owner_id = $1 and not e.disabled and e.id <> $4 and $2 = any (e.event_types))`,
    [message.ownerId, message.type, JSON.stringify(message.data), message.sourceEndpointId],
  );
}

// The outbox

/** A conversation whose events are owed a `conversation.events` message. */
export interface OwedConversation {
  id: string;
  owner_id: string;
  /** Microseconds since the epoch: part of the message ids (a conversation deleted and sent again starts at seq 1 again). */
  created_micros: string;
  event_count: number;
  from_seq: number;
}

/** Up to `limit` conversations owed `conversation.events` messages (their `webhook_events_from` mark). */
export function owedConversations(on: SqlRunner, limit: number): Promise<OwedConversation[]> {
  return sqlRows<OwedConversation>(
    on,
    `select id, owner_id, (extract(epoch from created_at) * 1000000)::bigint::text as created_micros, event_count, webhook_events_from as from_seq
     from conversations where webhook_events_from is not null limit $1`,
    [limit],
  );
}

/**
 * Locks, until the transaction ends, those of `owed` whose mark has not moved since it was read, skipping
 * rows an ingest transaction holds (the worker never waits for one); returns their ids.
 */
export async function lockUnmovedMarks(trx: SqlRunner, owed: readonly OwedConversation[]): Promise<string[]> {
  const rows = await sqlRows<{ id: string }>(
    trx,
    `select c.id from conversations c join unnest($1::uuid[], $2::integer[]) as o(id, from_seq) on o.id = c.id
     where c.webhook_events_from = o.from_seq order by c.id for no key update of c skip locked`,
    [owed.map((c) => c.id), owed.map((c) => c.from_seq)],
  );
  return rows.map((r) => r.id);
}

/** One ingest transaction's run of a conversation's events: what a message never cuts. */
export interface TransactionRun {
  conversation_id: string;
  from_seq: number;
  to_seq: number;
  /** When the transaction stored them. */
  received_at: Date;
  /** The events' stored JSON, in bytes, each counted with its separating comma (as a body counts them). */
  bytes: number;
}

/**
 * The owed events of each conversation, `maxEvents` at most from its mark, as runs of one ingest
 * transaction each (one `xmin`), in order.
 */
export function owedTransactionRuns(on: SqlRunner, owed: readonly OwedConversation[], maxEvents: number): Promise<TransactionRun[]> {
  return sqlRows<TransactionRun>(
    on,
    `with events as (
       select e.conversation_id, e.seq, e.received_at, octet_length(e.payload::text) + 1 as bytes,
         case when e.xmin = lag(e.xmin) over (partition by e.conversation_id order by e.seq) then 0 else 1 end as starts
       from unnest($1::uuid[], $2::integer[], $3::integer[]) o(id, from_seq, to_seq)
       -- A primary-key probe per range whatever the statistics say ("offset 0" keeps it one): a table grown fast and
       -- not analysed yet was scanned whole per call.
       cross join lateral (
         select e.*, e.xmin from conversation_events e where e.conversation_id = o.id and e.seq between o.from_seq and o.to_seq offset 0
       ) e
     ),
     runs as (select *, sum(starts) over (partition by conversation_id order by seq) as run from events)
     select conversation_id, min(seq) as from_seq, max(seq) as to_seq, min(received_at) as received_at, sum(bytes)::integer as bytes
     from runs group by conversation_id, run order by conversation_id, min(seq)`,
    [owed.map((c) => c.id), owed.map((c) => c.from_seq), owed.map((c) => Math.min(c.event_count, c.from_seq + maxEvents - 1))],
  );
}

/** A `conversation.events` message to store: a range of whole transactions' events. */
export interface EventsMessage {
  conversationId: string;
  ownerId: string;
  createdMicros: string;
  fromSeq: number;
  toSeq: number;
  /** Its first transaction's time: an endpoint created after it does not get the message. */
  createdAt: Date;
}

/**
 * Stores `conversation.events` messages; the id is `msg_` + MD5 of the conversation, its creation time
 * and the first sequence number, so a message made twice is stored once. Returns, in order, the id of
 * each message and the last sequence number of the message stored under it (another when it was there;
 * `null` when this transaction cannot see it yet).
 */
export async function insertEventMessages(trx: SqlRunner, messages: readonly EventsMessage[]): Promise<{ id: string; stored_to_seq: number | null }[]> {
  if (messages.length === 0) return [];
  return sqlRows<{ id: string; stored_to_seq: number | null }>(
    trx,
    `with new as (
       select 'msg_' || md5(m.conversation_id::text || '/' || m.created_micros || '/' || m.from_seq) as id, m.*
       from unnest($1::uuid[], $2::uuid[], $3::text[], $4::integer[], $5::integer[], $6::timestamptz[])
         with ordinality as m(conversation_id, owner_id, created_micros, from_seq, to_seq, created_at, ord)
     ),
     inserted as (
       insert into webhook_messages (id, owner_id, conversation_id, type, data, created_at)
       select n.id, n.owner_id, n.conversation_id, 'conversation.events',
         jsonb_build_object('conversation_id', n.conversation_id, 'from_seq', n.from_seq, 'to_seq', n.to_seq), n.created_at
       from new n order by n.ord
       on conflict (id) do nothing
       returning id
     )
     select n.id, coalesce(case when i.id is not null then n.to_seq end, (w.data->>'to_seq')::integer) as stored_to_seq
     from new n left join inserted i on i.id = n.id left join webhook_messages w on i.id is null and w.id = n.id
     order by n.ord`,
    [
      messages.map((m) => m.conversationId),
      messages.map((m) => m.ownerId),
      messages.map((m) => m.createdMicros),
      messages.map((m) => m.fromSeq),
      messages.map((m) => m.toSeq),
      messages.map((m) => m.createdAt),
    ],
  );
}

/** Removes messages this transaction stored (made past a range another had stored: they are made again from its end). */
export async function deleteMessages(trx: SqlRunner, ids: readonly string[]): Promise<void> {
  await sqlRun(trx, 'delete from webhook_messages where id = any($1::text[])', [ids]);
}

/** Moves the locked conversations' marks to `next`, the first event not in a message: `null` when there is none yet. */
export async function moveOwedMarks(trx: SqlRunner, marks: readonly { id: string; next: number }[]): Promise<void> {
  await sqlRun(
    trx,
    `update conversations c set webhook_events_from = case when m.next <= c.event_count then m.next end
     from unnest($1::uuid[], $2::integer[]) as m(id, next) where c.id = m.id`,
    [marks.map((m) => m.id), marks.map((m) => m.next)],
  );
}

/** Locks up to `limit` messages not fanned out yet, oldest first, skipping those another instance holds. */
export async function lockUnfannedMessages(trx: SqlRunner, limit: number): Promise<string[]> {
  const rows = await sqlRows<{ id: string }>(trx, 'select id from webhook_messages where not fanned_out order by created_at limit $1 for update skip locked', [
    limit,
  ]);
  return rows.map((r) => r.id);
}

/**
 * Inserts one delivery per endpoint that wants each message (enabled, created no later than it, its
 * types, conversations and tags matching) and marks the messages fanned out; returns the messages that got deliveries.
 */
export async function fanOutMessages(trx: SqlRunner, messageIds: readonly string[]): Promise<string[]> {
  const rows = await sqlRows<{ message_id: string }>(
    trx,
    `with deliveries as (
       insert into webhook_deliveries (message_id, endpoint_id, next_attempt_at, created_at)
       select m.id, e.id, now(), m.created_at
       from webhook_messages m join webhook_endpoints e on e.owner_id = m.owner_id
       where m.id = any ($1::text[]) and not e.disabled and e.created_at <= m.created_at
         -- An operational message (it has a source endpoint) goes only to the others that list its type.
         and case when m.source_endpoint_id is null then e.event_types is null or m.type = any (e.event_types)
           else m.type = any (e.event_types) and e.id <> m.source_endpoint_id end
         and (e.conversation_id is null or e.conversation_id = m.conversation_id)
         and (e.conversation_ids is null or m.conversation_id = any (e.conversation_ids))
         -- A tag filter reads the conversation's tags as they are now (one primary-key probe per message and such endpoint).
         and (e.tags is null or exists (select 1 from conversations c where c.id = m.conversation_id and c.tags @> e.tags))
       on conflict do nothing
       returning message_id
     ), fanned_out as (
       update webhook_messages set fanned_out = true where id = any ($1::text[])
     )
     select distinct message_id from deliveries`,
    [messageIds],
  );
  return rows.map((r) => r.message_id);
}

/**
 * Outbound work not done yet: deliveries due, plus messages not fanned out yet (their deliveries do
 * not exist yet), plus conversations whose newest events are owed a message not made yet.
 */
export async function outboundQueueDepth(on: SqlRunner): Promise<number> {
  const [row] = await sqlRows<{ pending: number }>(
    on,
    `select (select count(*) from webhook_deliveries where state = 'pending')::integer
          + (select count(*) from webhook_messages where not fanned_out)::integer
          + (select count(*) from conversations where webhook_events_from is not null)::integer as pending`,
  );
  return row!.pending;
}

// Re-sending tasks: a recovery (an endpoint's failed messages of a window) or a bulk retry (a filtered message list), in order

/** A recovery (`POST …/recover`) or a bulk retry (`POST …/message-retries`). */
export type ResendTaskKind = 'recover' | 'retry';

/** A `webhook_recover_tasks` row as the driver returns it. */
export interface RecoverTaskRow {
  id: string;
  endpoint_id: string;
  kind: ResendTaskKind;
  status: 'failed' | 'succeeded';
  event_type: string | null;
  conversation_id: string | null;
  since: Date;
  until: Date;
  state: 'running' | 'completed' | 'failed';
  total: number;
  sent: number;
  succeeded: number;
  cursor_created_at: Date | null;
  cursor_message_id: string | null;
  last_error: string | null;
  created_at: Date;
  finished_at: Date | null;
}

/** Locks the endpoint's row until the transaction ends: one recovery starts at a time per endpoint. */
export async function lockEndpoint(trx: SqlRunner, id: string): Promise<void> {
  await sqlRun(trx, 'select 1 from webhook_endpoints where id = $1 for update', [id]);
}

/** The kind of the endpoint's running task (a recovery or a bulk retry), if one runs. */
export async function runningTaskKind(on: SqlRunner, endpointId: string): Promise<ResendTaskKind | undefined> {
  const [row] = await sqlRows<{ kind: ResendTaskKind }>(on, `select kind from webhook_recover_tasks where endpoint_id = $1 and state = 'running' limit 1`, [endpointId]);
  return row?.kind;
}

/** How many of the endpoint's messages match `filter`, counted up to `cap`. */
export async function countDeliveries(on: SqlRunner, endpointId: string, filter: DeliveryFilter, cap: number): Promise<number> {
  const params: unknown[] = [endpointId, cap];
  const conditions = deliveryConditions(filter, params);
  const [row] = await sqlRows<{ count: number }>(
    on,
    `select count(*)::integer as count from (select 1 from webhook_deliveries d join webhook_messages m on m.id = d.message_id
       where d.endpoint_id = $1${conditions} limit $2) f`,
    params,
  );
  return row!.count;
}

/** A new task; one with nothing to send is completed at once. */
export async function insertRecoverTask(
  trx: SqlRunner,
  task: {
    id: string;
    endpointId: string;
    kind: ResendTaskKind;
    status: 'failed' | 'succeeded';
    eventType: string | null;
    conversationId: string | null;
    since: string;
    until: string;
    total: number;
  },
): Promise<RecoverTaskRow> {
  const [row] = await sqlRows<RecoverTaskRow>(
    trx,
    `insert into webhook_recover_tasks (id, endpoint_id, since, until, total, state, finished_at, kind, status, event_type, conversation_id)
     values ($1, $2, $3, $4, $5, case when $5 = 0 then 'completed' else 'running' end, case when $5 = 0 then now() end, $6, $7, $8, $9) returning *`,
    [task.id, task.endpointId, task.since, task.until, task.total, task.kind, task.status, task.eventType, task.conversationId],
  );
  return row!;
}

/** One task of the endpoint, of that kind. */
export async function findRecoverTask(on: SqlRunner, id: string, endpointId: string, kind: ResendTaskKind): Promise<RecoverTaskRow | undefined> {
  const [row] = await sqlRows<RecoverTaskRow>(on, 'select * from webhook_recover_tasks where id = $1 and endpoint_id = $2 and kind = $3', [id, endpointId, kind]);
  return row;
}

/** Takes a running task no worker holds (its lease lapsed or never taken) for `leaseMs`; skips those another instance is taking. */
export async function claimRecoverTask(on: SqlRunner, leaseMs: number): Promise<RecoverTaskRow | undefined> {
  const [row] = await sqlRows<RecoverTaskRow>(
    on,
    `update webhook_recover_tasks t set lease_until = now() + ($1 * interval '1 millisecond')
     from (select id from webhook_recover_tasks where state = 'running' and (lease_until is null or lease_until < now())
           order by created_at limit 1 for update skip locked) c
     where t.id = c.id returning t.*`,
    [leaseMs],
  );
  return row;
}

/** The endpoint's next message of the task's set after its cursor, in (created_at, message_id) order. */
export async function nextTaskDelivery(on: SqlRunner, task: RecoverTaskRow): Promise<{ message_id: string; created_at: Date } | undefined> {
  const params: unknown[] = [task.endpoint_id, task.cursor_created_at, task.cursor_message_id];
  const conditions = deliveryConditions(taskFilter(task), params);
  const [row] = await sqlRows<{ message_id: string; created_at: Date }>(
    on,
    `select d.message_id, d.created_at from webhook_deliveries d join webhook_messages m on m.id = d.message_id
     where d.endpoint_id = $1${conditions}
       and ($2::timestamptz is null or (d.created_at, d.message_id) > ($2::timestamptz, $3::text))
     order by d.created_at, d.message_id limit 1`,
    params,
  );
  return row;
}

/** The set a task re-sends, as the message log's filter. */
function taskFilter(task: RecoverTaskRow): DeliveryFilter {
  return { status: task.status, eventType: task.event_type, conversationId: task.conversation_id, since: task.since, until: task.until };
}

/** Records one message handled by the task and renews its lease; undefined when the task is gone (its endpoint deleted). */
export async function advanceRecoverTask(
  on: SqlRunner,
  step: { id: string; createdAt: Date; messageId: string; sent: number; succeeded: number; leaseMs: number },
): Promise<RecoverTaskRow | undefined> {
  const [row] = await sqlRows<RecoverTaskRow>(
    on,
    `update webhook_recover_tasks set cursor_created_at = $2, cursor_message_id = $3, sent = sent + $4, succeeded = succeeded + $5,
       lease_until = now() + ($6 * interval '1 millisecond')
     where id = $1 and state = 'running' returning *`,
    [step.id, step.createdAt, step.messageId, step.sent, step.succeeded, step.leaseMs],
  );
  return row;
}

/** Ends a task: `completed`, or `failed` with why. */
export async function finishRecoverTask(on: SqlRunner, id: string, state: 'completed' | 'failed', error: string | null): Promise<void> {
  await sqlRun(on, `update webhook_recover_tasks set state = $2, last_error = $3, finished_at = now(), lease_until = null where id = $1 and state = 'running'`, [
    id,
    state,
    error,
  ]);
}

/** Lets another worker take the task at once (this one is stopping). */
export async function releaseRecoverTask(on: SqlRunner, id: string): Promise<void> {
  await sqlRun(on, `update webhook_recover_tasks set lease_until = null where id = $1 and state = 'running'`, [id]);
}

// Stats

/** An endpoint's attempts since `sinceMs` ago, counted by outcome, with their latency percentiles. */
export interface AttemptStatsRow {
  since: Date;
  attempts: number;
  succeeded: number;
  failed_3xx: number;
  failed_4xx: number;
  failed_5xx: number;
  failed_other: number;
  no_response: number;
  p50: number | null;
  p99: number | null;
  last_success_at: Date | null;
}

export async function endpointAttemptStats(on: SqlRunner, endpointId: string, sinceMs: number): Promise<AttemptStatsRow> {
  const [row] = await sqlRows<AttemptStatsRow>(
    on,
    `with w as (select now() - ($2 * interval '1 millisecond') as since)
     select w.since, count(a.*)::integer as attempts,
       count(*) filter (where a.error is null and a.attempt is not null)::integer as succeeded,
       count(*) filter (where a.error is not null and a.status_code between 300 and 399)::integer as failed_3xx,
       count(*) filter (where a.error is not null and a.status_code between 400 and 499)::integer as failed_4xx,
       count(*) filter (where a.error is not null and a.status_code between 500 and 599)::integer as failed_5xx,
       count(*) filter (where a.error is not null and (a.status_code < 300 or a.status_code > 599))::integer as failed_other,
       count(*) filter (where a.error is not null and a.status_code is null)::integer as no_response,
       percentile_cont(0.5) within group (order by a.duration_ms) as p50,
       percentile_cont(0.99) within group (order by a.duration_ms) as p99,
       (select max(s.started_at) from webhook_attempts s where s.endpoint_id = $1 and s.error is null) as last_success_at
     from w left join webhook_attempts a on a.endpoint_id = $1 and a.started_at >= w.since
     group by w.since`,
    [endpointId, sinceMs],
  );
  return row!;
}

// Rate limits

/**
 * Takes the endpoint's next slot (slots `intervalMs` apart, on the database's clock, shared by every
 * instance) if it is at most `maxWaitMs` away: `taken` and how long from now until it. Otherwise
 * nothing is taken, and `waitMs` says roughly when the next free slot is.
 */
export async function reserveEndpointSlot(on: SqlRunner, endpointId: string, intervalMs: number, maxWaitMs: number): Promise<{ taken: boolean; waitMs: number }> {
  await sqlRun(on, `insert into webhook_endpoint_throttle (endpoint_id, next_at) values ($1, '-infinity') on conflict (endpoint_id) do nothing`, [endpointId]);
  const [row] = await sqlRows<{ taken: boolean; wait_ms: number }>(
    on,
    `with taken as (
       update webhook_endpoint_throttle t set next_at = greatest(t.next_at, clock_timestamp()) + $2 * interval '1 millisecond'
       where t.endpoint_id = $1 and t.next_at <= clock_timestamp() + $3 * interval '1 millisecond'
       returning greatest(0, extract(epoch from (t.next_at - $2 * interval '1 millisecond' - clock_timestamp())) * 1000)::float8 as wait_ms
     )
     select true as taken, wait_ms from taken
     union all
     select false, greatest(0, extract(epoch from (next_at - clock_timestamp())) * 1000)::float8
     from webhook_endpoint_throttle where endpoint_id = $1 and not exists (select 1 from taken)`,
    [endpointId, intervalMs, maxWaitMs],
  );
  return { taken: row!.taken, waitMs: row!.wait_ms };
}

/** This instance's busy webhook's rest factor, reported now; null (no longer busy) removes the report. */
export async function reportIngestPressure(on: SqlRunner, instanceId: string, restFactor: number | null): Promise<void> {
  if (restFactor === null) {
    await sqlRun(on, 'delete from ingest_pressure where instance_id = $1', [instanceId]);
    return;
  }
  await sqlRun(
    on,
    `insert into ingest_pressure (instance_id, rest_factor, reported_at) values ($1, $2, now())
     on conflict (instance_id) do update set rest_factor = excluded.rest_factor, reported_at = excluded.reported_at`,
    [instanceId, restFactor],
  );
}

/** The highest rest factor the other instances reported within `freshMs`, null when none is busy; older reports are dropped. */
export async function othersIngestPressure(on: SqlRunner, instanceId: string, freshMs: number): Promise<number | null> {
  const rows = await sqlRows<{ rest_factor: number | null }>(
    on,
    `with gone as (
       delete from ingest_pressure where reported_at < now() - $2 * 10 * interval '1 millisecond'
     )
     select max(rest_factor) as rest_factor from ingest_pressure
     where instance_id <> $1 and reported_at >= now() - $2 * interval '1 millisecond'`,
    [instanceId, freshMs],
  );
  return rows[0]?.rest_factor ?? null;
}
