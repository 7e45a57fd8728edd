import { getConstructionPlans } from 'pg-boss';

/** pg-boss's schema; the fan-out and the retries insert into its job table in our transactions. */
export const QUEUE_SCHEMA = 'pgboss';
/** The pg-boss queue of delivery work: a message's first attempt to all its endpoints `{message_id, attempt: 1}`, then one job per retry `{message_id, endpoint_id, attempt}`. */
export const DELIVERY_QUEUE = 'webhook-delivery';

/** Arbitrary constant: serialises the queue's installation across processes starting together. */
const QUEUE_INSTALL_LOCK_ID = 7_240_115;

interface PgClient {
  query(text: string, values?: unknown[]): Promise<{ rows: Record<string, unknown>[] }>;
}

/**
 * Installs pg-boss's schema (its own construction SQL) and the delivery queue when missing, under a
 * session advisory lock, so that the triggers can enqueue before any worker has started. Later
 * pg-boss versions migrate the schema themselves when a worker starts (`migrate: true`, their lock).
 */
export async function installQueueSchema(client: PgClient): Promise<void> {
  await client.query('select pg_advisory_lock($1)', [QUEUE_INSTALL_LOCK_ID]);
  try {
    const [row] = (await client.query(`select to_regclass($1) is not null as installed`, [`${QUEUE_SCHEMA}.version`])).rows;
    if (!row!.installed) await client.query(getConstructionPlans(QUEUE_SCHEMA));
    await client.query(
      `select ${QUEUE_SCHEMA}.create_queue($1, $2::jsonb) where not exists (select 1 from ${QUEUE_SCHEMA}.queue where name = $1)`,
      [DELIVERY_QUEUE, JSON.stringify({ policy: 'standard', retryLimit: 5, retryDelay: 1, expireInSeconds: 60 })],
    );
  } finally {
    await client.query('select pg_advisory_unlock($1)', [QUEUE_INSTALL_LOCK_ID]);
  }
}
