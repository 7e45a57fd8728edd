import type { SqlRunner } from '../db/sql.ts';
import { sqlRows, sqlRun } from '../db/sql.ts';

/** A stored record as `findRecord` reads it. */
export interface IdempotencyRow {
  operation_id: string;
  request_hash: Buffer;
  /** Null while the first request is in flight. */
  status: number | null;
  response: string | null;
}

/**
 * Claims `(owner, key)` for a new request: inserts the record, or takes over one that expired or whose
 * first request was abandoned in flight (older than `abandonAfterMs`). True when claimed.
 */
export async function claimRecord(
  on: SqlRunner,
  record: { ownerId: string; key: string; operationId: string; requestHash: Buffer; ttlMs: number; abandonAfterMs: number },
): Promise<boolean> {
  const rows = await sqlRows<{ claimed: boolean }>(
    on,
    `insert into idempotency_records (owner_id, idempotency_key, operation_id, request_hash, expires_at)
     values ($1, $2, $3, $4, now() + $5 * interval '1 millisecond')
     on conflict (owner_id, idempotency_key) do update
       set operation_id = excluded.operation_id, request_hash = excluded.request_hash, status = null,
           response = null, created_at = now(), expires_at = excluded.expires_at
       where idempotency_records.expires_at <= now()
          or (idempotency_records.status is null and idempotency_records.created_at < now() - $6 * interval '1 millisecond')
     returning true as claimed`,
    [record.ownerId, record.key, record.operationId, record.requestHash, record.ttlMs, record.abandonAfterMs],
  );
  return rows.length > 0;
}

/** The record of `(owner, key)` while it has not expired. */
export async function findRecord(on: SqlRunner, ownerId: string, key: string): Promise<IdempotencyRow | undefined> {
  const rows = await sqlRows<IdempotencyRow>(
    on,
    `select operation_id, request_hash, status, response from idempotency_records
     where owner_id = $1 and idempotency_key = $2 and expires_at > now()`,
    [ownerId, key],
  );
  return rows[0];
}

/** Stores the first request's response (sealed) on its claimed record. */
export async function completeRecord(on: SqlRunner, ownerId: string, key: string, status: number, sealedResponse: string): Promise<void> {
  await sqlRun(
    on,
    'update idempotency_records set status = $3, response = $4 where owner_id = $1 and idempotency_key = $2 and status is null',
    [ownerId, key, status, sealedResponse],
  );
}

/** Lets the key go again: the first request failed, so a retry is a new request. */
export async function releaseRecord(on: SqlRunner, ownerId: string, key: string): Promise<void> {
  await sqlRun(on, 'delete from idempotency_records where owner_id = $1 and idempotency_key = $2 and status is null', [ownerId, key]);
}
