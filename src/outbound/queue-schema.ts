import { getConstructionPlans } from 'pg-boss';

/** pg-boss's schema: the delivery queue's jobs live there (see outbound-queue.ts). */
export const QUEUE_SCHEMA = 'pgboss';
/** The pg-boss queue of delivery work: a message's first attempt to all its endpoints `{message_id, attempt: 1}`, then one job per retry `{message_id, endpoint_id, attempt}`. */
export const DELIVERY_QUEUE = 'webhook-delivery';

/** Arbitrary constant: serialises the queue's installation across processes starting together. */
const QUEUE_INSTALL_LOCK_ID = 7_240_115;

interface PgClient {
  query(text: string, values?: unknown[]): Promise<{ rows: Record<string, unknown>[] }>;
}

/**
 * Installs pg-boss's schema (its own construction SQL) and the delivery queue when missing, so that
 * any instance can enqueue before a worker has started; safe from several processes at once. Later
 * pg-boss versions migrate the schema themselves when a worker starts (`migrate: true`, their lock).
 *
 * Serialised by a transaction-scoped advisory lock: the connection may go through a transaction
 * pooler (`DATABASE_POOL_MODE=transaction`), where a session lock stays on whichever server
 * connection took it and the unlock runs on another. Such a leftover lock made the next instance's
 * start-up wait until its statement timeout (the cluster test, about one start in four).
 */
export async function installQueueSchema(client: PgClient): Promise<void> {
  await underInstallLock(client, async () => {
    const [row] = (await client.query(`select to_regclass($1) is not null as installed`, [`${QUEUE_SCHEMA}.version`])).rows;
    if (row!.installed) return 'open';
    // The construction SQL ends with its own COMMIT, which ends this transaction, lock and all, once the schema is built.
    await client.query(getConstructionPlans(QUEUE_SCHEMA));
    return 'committed';
  });
  await underInstallLock(client, async () => {
    await client.query(
      `select ${QUEUE_SCHEMA}.create_queue($1, $2::jsonb) where not exists (select 1 from ${QUEUE_SCHEMA}.queue where name = $1)`,
      [DELIVERY_QUEUE, JSON.stringify({ policy: 'standard', retryLimit: 5, retryDelay: 1, expireInSeconds: 60 })],
    );
    return 'open';
  });
}

/** Runs `work` in a transaction holding the install lock; commits unless `work` already has. */
async function underInstallLock(client: PgClient, work: () => Promise<'open' | 'committed'>): Promise<void> {
  await client.query('begin');
  try {
    await client.query('select pg_advisory_xact_lock($1)', [QUEUE_INSTALL_LOCK_ID]);
    if ((await work()) === 'open') await client.query('commit');
  } catch (error) {
    await client.query('rollback').catch(() => undefined);
    throw error;
  }
}
