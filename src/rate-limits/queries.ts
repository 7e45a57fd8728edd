import type { SqlRunner } from '../db/sql.ts';
import { sqlRows, sqlRun } from '../db/sql.ts';

/**
 * Marks this instance alive and counts the other instances seen within `freshMs` (rows silent for
 * ten times that are deleted); one round trip.
 */
export async function beatAndCountInstances(on: SqlRunner, instanceId: string, freshMs: number): Promise<number> {
  const rows = await sqlRows<{ others: number }>(
    on,
    `with beat as (
       insert into rate_limit_instances (instance_id, seen_at) values ($1, now())
       on conflict (instance_id) do update set seen_at = now()
     ), gone as (
       delete from rate_limit_instances where seen_at < now() - $2 * 10 * interval '1 millisecond'
     )
     select count(*)::int as others from rate_limit_instances
     where instance_id <> $1 and seen_at >= now() - $2 * interval '1 millisecond'`,
    [instanceId, freshMs],
  );
  return rows[0]?.others ?? 0;
}

/** Removes this instance from the count (on shutdown), so the others take its share at their next beat. */
export async function forgetInstance(on: SqlRunner, instanceId: string): Promise<void> {
  await sqlRun(on, 'delete from rate_limit_instances where instance_id = $1', [instanceId]);
}
