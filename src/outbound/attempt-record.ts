import type { Knex } from '@mikro-orm/postgresql';
import type { OutboundWebhookConfig } from '../config.ts';
import type { Attempt } from './attempt.ts';
import type { OutboundQueue } from './outbound-queue.ts';

/** How an attempt ended, for the metrics. */
export type AttemptOutcome = 'succeeded' | 'retrying' | 'failed' | 'gone' | 'refused';

/** An attempt judged by the retry schedule: what its delivery becomes. */
export interface JudgedAttempt extends Attempt {
  succeeded: boolean;
  gone: boolean;
  /** Another attempt follows, at `nextAt`. */
  more: boolean;
  nextAt: Date | null;
  outcome: AttemptOutcome;
  state: 'succeeded' | 'pending' | 'failed';
}

type RecordConfig = Pick<OutboundWebhookConfig, 'retryScheduleMs' | 'disableAfterMs'>;

/**
 * Records the attempts of one job (one message; several endpoints for a first attempt) in one
 * transaction of set-based statements: the attempt rows, the deliveries' states, the next attempts'
 * jobs, and the endpoints' failure bookkeeping. Returns the attempts recorded: one another worker
 * recorded first is left out.
 */
export async function recordAttempts(knex: Knex, queue: OutboundQueue, config: RecordConfig, made: Attempt[]): Promise<JudgedAttempt[]> {
  if (made.length === 0) return [];
  const judged = made.map((attempt) => judge(attempt, config.retryScheduleMs));
  const messageId = made[0]!.row.id;
  return knex.transaction(async (trx) => {
    const ours = await insertAttempts(trx, messageId, judged);
    if (ours.length === 0) return ours;
    await updateDeliveries(trx, messageId, ours);
    const retries = ours.filter((o) => o.more);
    await queue.enqueueDeliveries(
      trx,
      retries.map((o) => ({ message_id: messageId, endpoint_id: o.row.endpoint_id, attempt: o.attempt + 1, startAfter: o.nextAt! })),
    );
    await updateEndpoints(trx, ours, config.disableAfterMs);
    return ours;
  });
}

function judge(made: Attempt, schedule: readonly number[]): JudgedAttempt {
  const { result, attempt, refused } = made;
  const succeeded = result.error === null;
  const gone = result.statusCode === 410;
  const more = !succeeded && !gone && attempt < schedule.length;
  const nextAt = more ? new Date(Date.now() + jitter(schedule[attempt]!)) : null;
  const outcome: AttemptOutcome = succeeded ? 'succeeded' : gone ? 'gone' : refused && !more ? 'refused' : more ? 'retrying' : 'failed';
  const state = succeeded ? 'succeeded' : more ? 'pending' : 'failed';
  return { ...made, succeeded, gone, more, nextAt, outcome, state };
}

/** Inserts the attempt rows; returns those this worker inserted (the others were recorded already). */
async function insertAttempts(trx: Knex.Transaction, messageId: string, judged: JudgedAttempt[]): Promise<JudgedAttempt[]> {
  const inserted = (
    await trx.raw(
      `insert into webhook_attempts (message_id, endpoint_id, attempt, started_at, duration_ms, status_code, error, response_excerpt)
       select ?, a.* from unnest(?::uuid[], ?::integer[], ?::timestamptz[], ?::integer[], ?::integer[], ?::text[], ?::text[]) as a
       on conflict do nothing returning endpoint_id`,
      pgBindings(
        messageId,
        judged.map((o) => o.row.endpoint_id),
        judged.map((o) => o.attempt),
        judged.map((o) => o.startedAt.toISOString()),
        judged.map((o) => Math.round(o.result.durationMs)),
        judged.map((o) => o.result.statusCode),
        judged.map((o) => o.result.error),
        judged.map((o) => o.result.responseExcerpt),
      ),
    )
  ).rows as { endpoint_id: string }[];
  const mine = new Set(inserted.map((r) => r.endpoint_id));
  return judged.filter((o) => mine.has(o.row.endpoint_id));
}

async function updateDeliveries(trx: Knex.Transaction, messageId: string, ours: JudgedAttempt[]): Promise<void> {
  await trx.raw(
    `update webhook_deliveries d set state = u.state, attempts = greatest(d.attempts, u.attempt), last_status_code = u.status_code,
       last_error = u.error, next_attempt_at = u.next_attempt_at
     from unnest(?::uuid[], ?::text[], ?::integer[], ?::integer[], ?::text[], ?::timestamptz[]) as u(endpoint_id, state, attempt, status_code, error, next_attempt_at)
     where d.message_id = ? and d.endpoint_id = u.endpoint_id`,
    pgBindings(
      ours.map((o) => o.row.endpoint_id),
      ours.map((o) => o.state),
      ours.map((o) => o.attempt),
      ours.map((o) => o.result.statusCode),
      ours.map((o) => o.result.error),
      ours.map((o) => o.nextAt?.toISOString() ?? null),
      messageId,
    ),
  );
}

/** A success clears the endpoint's failures; a 410 disables it; a failure long enough after the last success too. */
async function updateEndpoints(trx: Knex.Transaction, ours: JudgedAttempt[], disableAfterMs: number): Promise<void> {
  const recovered = ours.filter((o) => o.succeeded).map((o) => o.row.endpoint_id);
  if (recovered.length > 0) {
    await trx.raw('update webhook_endpoints set failing_since = null where id = any (?::uuid[]) and failing_since is not null', [recovered]);
  }
  for (const o of ours) {
    if (o.gone) {
      await trx.raw(
        `update webhook_endpoints set disabled = true, disabled_reason = 'The receiver answered 410 Gone', updated_at = now() where id = ?`,
        [o.row.endpoint_id],
      );
    } else if (!o.succeeded && !o.row.disabled) {
      // Failing since the first failure after the last success; disabled once that is long enough.
      const since = o.startedAt.toISOString();
      await trx.raw(
        `update webhook_endpoints set failing_since = coalesce(failing_since, ?::timestamptz),
           disabled = coalesce(failing_since, ?::timestamptz) <= now() - (? * interval '1 millisecond'),
           disabled_reason = case when coalesce(failing_since, ?::timestamptz) <= now() - (? * interval '1 millisecond')
             then 'Every attempt failed for too long' else disabled_reason end,
           updated_at = now()
         where id = ?`,
        [since, since, disableAfterMs, since, disableAfterMs, o.row.endpoint_id],
      );
    }
  }
}

/** Bindings for `unnest(?::type[], …)`: arrays holding nulls, which pg sends as SQL arrays (knex's types allow no null element). */
function pgBindings(...values: unknown[]): Knex.RawBinding[] {
  return values as Knex.RawBinding[];
}

/** ±20 % around `ms`, so that receivers recovering from an outage are not hit by every retry at once. */
function jitter(ms: number): number {
  return Math.round(ms * (0.8 + Math.random() * 0.4));
}
