import type { Knex } from '@mikro-orm/postgresql';
import { DELIVERY_QUEUE, QUEUE_SCHEMA } from './queue-schema.ts';

/**
 * Queues attempt `attempt` of a message to one endpoint at `startAfter`, inside the caller's
 * transaction: a row in pg-boss's job table with the delivery queue's settings, as the fan-out does
 * in SQL for first attempts.
 */
export async function queueAttempt(
  trx: Knex | Knex.Transaction,
  messageId: string,
  endpointId: string,
  attempt: number,
  startAfter: Date,
): Promise<void> {
  await trx.raw(
    `insert into ${QUEUE_SCHEMA}.job (name, data, retry_limit, retry_delay, expire_seconds, policy, start_after)
     select q.name, jsonb_build_object('message_id', ?::text, 'endpoint_id', ?::uuid, 'attempt', ?::integer), q.retry_limit, q.retry_delay,
            q.expire_seconds, q.policy, ?::timestamptz
     from ${QUEUE_SCHEMA}.queue q where q.name = ?`,
    [messageId, endpointId, attempt, startAfter.toISOString(), DELIVERY_QUEUE],
  );
}
