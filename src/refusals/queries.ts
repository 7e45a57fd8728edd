import type { EntityManager } from '@mikro-orm/postgresql';
import { sqlRows, sqlRun } from '../db/sql.ts';
import type { RefusalReason } from './refusal.ts';
import { REFUSED_DELIVERY_COLUMNS, type RefusedDeliveryRow } from './mapper.ts';

/** The refusal ledger's SQL (tables of Migration20261127110000_refused_deliveries). */

/**
 * Refusal `r` is resolved now: each of its kept event ids is stored in its conversation, which its own
 * user owns (Migration20261127190000_refusal_event_ids). Stops at the first id missing, one probe of
 * `conversation_events_event_id_key` each.
 */
const RESOLVED_NOW = `(r.event_ids is not null
  and exists (select 1 from conversations c where c.id = r.conversation_key and c.owner_id = r.owner_id)
  and not exists (select 1 from unnest(r.event_ids) as kept(event_id)
    where not exists (select 1 from conversation_events e where e.conversation_id = r.conversation_key and e.event_id = kept.event_id)))`;

/** Refusal `r` is resolved: kept so by the hourly sweep (`keepResolvedRefusals`), or found so now. */
const RESOLVED = `(r.resolved_at is not null or ${RESOLVED_NOW})`;

/** When the last of refusal `r`'s events was stored. */
const LAST_STORED_AT = `(select max(e.received_at) from conversation_events e where e.conversation_id = r.conversation_key and e.event_id = any(r.event_ids))`;

/** An item's columns: the row's, and when the last of its events was stored once all are. */
const ITEM_COLUMNS = `${REFUSED_DELIVERY_COLUMNS},
  coalesce(r.resolved_at, case when ${RESOLVED_NOW} then ${LAST_STORED_AT} end) as resolved_at`;

type Counted = { id: string; attempts: number };

/** One more attempt of a body already refused for this caller and conversation id; undefined when it is new. */
export async function countRepeatedRefusal(
  em: EntityManager,
  key: { ownerId: string; conversationId: string; fingerprint: string; senderId: string },
  refusal: RefusalReason,
): Promise<Counted | undefined> {
  const [row] = await sqlRows<Counted>(
    em,
    `update refused_deliveries set attempts = attempts + 1, last_seen_at = now(), status = $4, reason = $5, detail = $6, sender_id = $7
     where owner_id = $1 and conversation_id = $2 and fingerprint = $3 returning id, attempts`,
    [key.ownerId, key.conversationId, key.fingerprint, refusal.status, refusal.reason, refusal.detail, key.senderId],
  );
  return row;
}

/** A new refused body (or, raced by another instance, one more attempt of it). */
export async function insertRefusal(
  em: EntityManager,
  row: {
    ownerId: string;
    senderId: string;
    conversationId: string;
    conversationKey: string | null;
    fingerprint: string;
    refusal: RefusalReason;
    body: Buffer | null;
    bodyBytes: number | null;
    eventCount: number | null;
    eventIds: string[] | null;
  },
): Promise<Counted> {
  const [inserted] = await sqlRows<Counted>(
    em,
    `insert into refused_deliveries as r
       (owner_id, conversation_id, conversation_key, status, reason, detail, fingerprint, body, body_bytes, event_count, event_ids, sender_id)
     values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
     on conflict (owner_id, conversation_id, fingerprint) do update
       set attempts = r.attempts + 1, last_seen_at = now(), status = excluded.status, reason = excluded.reason, detail = excluded.detail,
           sender_id = excluded.sender_id
     returning id, attempts`,
    [row.ownerId, row.conversationId, row.conversationKey, row.refusal.status, row.refusal.reason, row.refusal.detail, row.fingerprint, row.body, row.bodyBytes, row.eventCount, row.eventIds, row.senderId],
  );
  return inserted!;
}

/**
 * Stores the `conversation.delivery_refused` message for the owner's endpoints unless one went out
 * for this conversation within the hour: one atomic upsert, so on any instance.
 */
export async function notifyOnceAnHour(em: EntityManager, ownerId: string, conversationId: string, data: Record<string, unknown>): Promise<boolean> {
  const rows = await sqlRows<{ queued: number }>(
    em,
    `with notice as (
       insert into delivery_refusal_notices as n (owner_id, conversation_id, sent_at) values ($1, $2, now())
       on conflict (owner_id, conversation_id) do update set sent_at = now() where n.sent_at <= now() - interval '1 hour'
       returning 1
     )
     select webhook_enqueue($1, $2, 'conversation.delivery_refused', $3::jsonb) as queued from notice`,
    [ownerId, conversationId, JSON.stringify(data)],
  );
  return rows[0]?.queued === 1;
}

/** Up to `limit` refusals, newest first (by id), matching every given filter (`resolved`: null for either). */
export function refusedDeliveryPage(
  em: EntityManager,
  filter: { ownerId: string | null; conversationKey: string | null; since: Date | null; resolved: boolean | null; beforeId: number | null },
  limit: number,
): Promise<RefusedDeliveryRow[]> {
  return sqlRows<RefusedDeliveryRow>(
    em,
    `select ${ITEM_COLUMNS} from refused_deliveries as r
     where ($1::uuid is null or owner_id = $1) and ($2::uuid is null or conversation_key = $2)
       and ($3::timestamptz is null or last_seen_at >= $3) and ($4::bigint is null or id < $4)
       and ($6::boolean is null or ${RESOLVED} = $6)
     order by id desc limit $5`,
    [filter.ownerId, filter.conversationKey, filter.since, filter.beforeId, limit, filter.resolved],
  );
}

/** The owner of a conversation, or undefined when it does not exist. */
export async function conversationOwner(em: EntityManager, conversationId: string): Promise<string | undefined> {
  const [row] = await sqlRows<{ owner_id: string }>(em, 'select owner_id from conversations where id = $1', [conversationId]);
  return row?.owner_id;
}

/** What a replay needs of a refusal: its owner, conversation id as sent, and kept body (null: never read). */
export async function replayableRow(em: EntityManager, id: number): Promise<{ owner_id: string; conversation_id: string; body: Buffer | null } | undefined> {
  const [row] = await sqlRows<{ owner_id: string; conversation_id: string; body: Buffer | null }>(
    em,
    'select owner_id, conversation_id, body from refused_deliveries where id = $1',
    [id],
  );
  return row;
}

/** Sets `replayed_at`; the row as it is now. */
export async function markReplayed(em: EntityManager, id: number): Promise<RefusedDeliveryRow | undefined> {
  const [row] = await sqlRows<RefusedDeliveryRow>(em, `update refused_deliveries as r set replayed_at = now() where id = $1 returning ${ITEM_COLUMNS}`, [id]);
  return row;
}

/** A replay refused again: the row says why as of now. */
export async function markRefusedAgain(em: EntityManager, id: number, refusal: RefusalReason): Promise<RefusedDeliveryRow | undefined> {
  const [row] = await sqlRows<RefusedDeliveryRow>(
    em,
    `update refused_deliveries as r set status = $2, reason = $3, detail = $4 where id = $1 returning ${ITEM_COLUMNS}`,
    [id, refusal.status, refusal.reason, refusal.detail],
  );
  return row;
}

/** Per conversation of `ownerId` among `conversationIds`: how many refusals are unresolved, and the latest of them. */
export function deliveryRefusalRows(
  em: EntityManager,
  ownerId: string,
  conversationIds: string[],
): Promise<{ conversation_key: string; count: string; last_seen_at: Date | string; status: number; detail: string }[]> {
  return sqlRows(
    em,
    `select distinct on (conversation_key) conversation_key, count(*) over (partition by conversation_key) as count,
            last_seen_at, status, detail
     from refused_deliveries as r where owner_id = $1 and conversation_key = any($2::uuid[]) and not ${RESOLVED}
     order by conversation_key, last_seen_at desc, id desc`,
    [ownerId, conversationIds],
  );
}

/** Keeps `resolved_at` of the refusals resolved since, so that reads stop probing their event ids; how many. */
export function keepResolvedRefusals(em: EntityManager): Promise<number> {
  return sqlRun(em, `update refused_deliveries as r set resolved_at = ${LAST_STORED_AT} where r.resolved_at is null and ${RESOLVED_NOW}`);
}
