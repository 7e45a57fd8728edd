import type pg from 'pg';
import type { EntityManager } from '@mikro-orm/postgresql';
import { sqlRows, sqlRun, type SqlRunner } from '../db/sql.ts';

/** Retention's SQL: the sweep's lock, its candidates, and the deletion in batches. */

/** Takes the sweep's session lock on `lock` (a direct connection); false when another instance holds it. */
export async function tryLockSweep(lock: pg.Client, lockId: number): Promise<boolean> {
  const { rows } = await lock.query<{ locked: boolean }>('select pg_try_advisory_lock($1) as locked', [lockId]);
  return rows[0]?.locked === true;
}

export async function unlockSweep(lock: pg.Client, lockId: number): Promise<void> {
  await lock.query('select pg_advisory_unlock($1)', [lockId]);
}

/**
 * Conversations not updated for `days`, oldest first by (updated_at, id), after `after`. No index on
 * updated_at on purpose: every delivery updates it, and indexing it would end the HOT updates of the hot path.
 */
export function expiredConversations(
  em: EntityManager,
  days: number,
  limit: number,
  after?: { updatedAt: string; id: string },
): Promise<{ id: string; updated_at: string }[]> {
  return sqlRows(
    em,
    `select id, updated_at::text as updated_at from conversations
      where updated_at < now() - make_interval(days => $1) ${after ? 'and (updated_at, id) > ($3::timestamptz, $4::uuid)' : ''}
      order by updated_at, id limit $2`,
    [days, limit, ...(after ? [after.updatedAt, after.id] : [])],
  );
}

/** Whether the conversation exists. */
export async function conversationExists(em: EntityManager, id: string): Promise<boolean> {
  return (await sqlRows(em, 'select 1 from conversations where id = $1', [id])).length > 0;
}

/** Locks the conversation if it is still expired; false when it was updated meanwhile or is gone. */
export async function lockIfExpired(trx: SqlRunner, id: string, days: number): Promise<boolean> {
  const rows = await sqlRows(trx, 'select 1 from conversations where id = $1 and updated_at < now() - make_interval(days => $2) for update', [id, days]);
  return rows.length > 0;
}

/** Deletes the conversation's first `limit` events; returns how many. */
export function deleteEventBatch(trx: SqlRunner, id: string, limit: number): Promise<number> {
  return sqlRun(
    trx,
    `delete from conversation_events where conversation_id = $1 and seq in
       (select seq from conversation_events where conversation_id = $1 order by seq limit $2)`,
    [id, limit],
  );
}

/** Deletes the conversation if it is still expired; false when it was updated meanwhile or is gone. */
export async function deleteIfExpired(em: EntityManager, id: string, days: number): Promise<boolean> {
  return (await sqlRun(em, 'delete from conversations where id = $1 and updated_at < now() - make_interval(days => $2)', [id, days])) > 0;
}

/** Deletes up to `limit` refused deliveries not seen for `days`; how many went. */
export async function deleteExpiredRefusals(em: EntityManager, days: number, limit: number): Promise<number> {
  const rows = await sqlRows<{ id: string }>(
    em,
    `delete from refused_deliveries where id in (
       select id from refused_deliveries where last_seen_at < now() - make_interval(days => $1) limit $2
     ) returning id`,
    [days, limit],
  );
  return rows.length;
}

/** Deletes the hourly notice marks of `conversation.delivery_refused` older than `days`. */
export async function deleteExpiredRefusalNotices(em: EntityManager, days: number): Promise<void> {
  await sqlRows(em, 'delete from delivery_refusal_notices where sent_at < now() - make_interval(days => $1)', [days]);
}

/** Deletes up to `limit` idempotency records past their 24 h; returns how many went. */
export async function deleteExpiredIdempotencyRecords(em: EntityManager, limit: number): Promise<number> {
  const rows = await sqlRows<{ owner_id: string }>(
    em,
    `delete from idempotency_records where (owner_id, idempotency_key) in (
       select owner_id, idempotency_key from idempotency_records where expires_at <= now() limit $1
     ) returning owner_id`,
    [limit],
  );
  return rows.length;
}

/** Where a sweep of the outbound message log has got to: the last message it looked at, by (created_at, id). */
export interface MessageLogCursor {
  createdAt: string;
  id: string;
}

/**
 * Looks at the next `limit` messages stored more than `days` ago, after `after`, and deletes those done
 * with (their deliveries and attempts go by cascade). A message stays while it is not fanned out, while a
 * delivery of it is pending (a retry due, a message sent again), or while an attempt of it is younger than
 * `days` (the stats' windows read attempts). Returns how many went, how many were looked at, and the cursor.
 */
export async function deleteExpiredWebhookMessages(
  em: EntityManager,
  days: number,
  limit: number,
  after: MessageLogCursor | undefined,
): Promise<{ deleted: number; examined: number; cursor: MessageLogCursor | undefined }> {
  const [row] = await sqlRows<{ deleted: number; examined: number; created_at: string | null; id: string | null }>(
    em,
    `with candidates as (
       select id, created_at from webhook_messages
       where created_at < now() - make_interval(days => $1) ${after ? 'and (created_at, id) > ($3::timestamptz, $4::text)' : ''}
       order by created_at, id limit $2
     ), deleted as (
       delete from webhook_messages m using candidates c
       where m.id = c.id and m.fanned_out
         and not exists (select 1 from webhook_deliveries d where d.message_id = m.id and d.state = 'pending')
         and not exists (select 1 from webhook_attempts a where a.message_id = m.id and a.started_at >= now() - make_interval(days => $1))
       returning m.id
     ), last as (
       select created_at::text as created_at, id from candidates order by created_at desc, id desc limit 1
     )
     select (select count(*) from deleted)::integer as deleted, (select count(*) from candidates)::integer as examined,
            (select created_at from last) as created_at, (select id from last) as id`,
    [days, limit, ...(after ? [after.createdAt, after.id] : [])],
  );
  const cursor = row!.id === null ? after : { createdAt: row!.created_at!, id: row!.id };
  return { deleted: row!.deleted, examined: row!.examined, cursor };
}
