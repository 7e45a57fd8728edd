import type { Knex } from '@mikro-orm/postgresql';
import { keyLookupsOnly } from '../db/sql.ts';
import type { OutboundWebhookConfig } from '../config.ts';
import type { Attempt } from './attempt.ts';
import type { OutboundQueue } from './outbound-queue.ts';
import {
  clearEndpointFailures,
  disableGoneEndpoint,
  insertAttemptRows,
  insertOperationalMessage,
  recordEndpointFailure,
  updateDeliveryStates,
  type EndpointChange,
} from './queries.ts';
import { OPERATIONAL_TYPES } from './event-catalog.ts';

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

type RecordConfig = Pick<OutboundWebhookConfig, 'retryScheduleMs' | 'disableAfterMs' | 'retryAfterMaxMs'>;

/**
 * Records attempts (one job's, or the jobs of one fetch: several messages and endpoints) in one
 * transaction of set-based statements: the attempt rows, the deliveries' states, the next attempts'
 * jobs, and the endpoints' failure bookkeeping. Returns the attempts recorded: one another worker
 * recorded first is left out. Without `retries` (a recovery's attempt) a failure is final.
 */
export async function recordAttempts(
  knex: Knex,
  queue: OutboundQueue,
  config: RecordConfig,
  made: Attempt[],
  options: { retries: boolean } = { retries: true },
): Promise<JudgedAttempt[]> {
  if (made.length === 0) return [];
  const judged = made.map((attempt) => judge(attempt, options.retries ? config.retryScheduleMs : [], config.retryAfterMaxMs));
  return knex.transaction(async (trx) => {
    await keyLookupsOnly(trx);
    const ours = await insertAttempts(trx, judged);
    if (ours.length === 0) return ours;
    await updateDeliveries(trx, ours);
    const retries = ours.filter((o) => o.more);
    await queue.enqueueDeliveries(
      trx,
      retries.map((o) => ({ message_id: o.row.id, endpoint_id: o.row.endpoint_id, attempt: o.attempt + 1, startAfter: o.nextAt! })),
    );
    await updateEndpoints(trx, ours, config.disableAfterMs);
    return ours;
  });
}

/** A receiver's `Retry-After` (429, 503), up to `retryAfterMaxMs`, replaces the schedule's delay before the next attempt. */
function judge(made: Attempt, schedule: readonly number[], retryAfterMaxMs: number): JudgedAttempt {
  const { result, attempt, refused } = made;
  const succeeded = result.error === null;
  const gone = result.statusCode === 410;
  const more = !succeeded && !gone && attempt < schedule.length;
  const delay = result.retryAfterMs === undefined ? jitter(schedule[attempt] ?? 0) : Math.min(result.retryAfterMs, retryAfterMaxMs);
  const nextAt = more ? new Date(Date.now() + delay) : null;
  const outcome: AttemptOutcome = succeeded ? 'succeeded' : gone ? 'gone' : refused && !more ? 'refused' : more ? 'retrying' : 'failed';
  const state = succeeded ? 'succeeded' : more ? 'pending' : 'failed';
  return { ...made, succeeded, gone, more, nextAt, outcome, state };
}

/** Inserts the attempt rows; returns those this worker inserted (the others were recorded already). */
async function insertAttempts(trx: Knex.Transaction, judged: JudgedAttempt[]): Promise<JudgedAttempt[]> {
  const inserted = await insertAttemptRows(
    trx,
    judged.map((o) => ({
      messageId: o.row.id,
      endpointId: o.row.endpoint_id,
      attempt: o.attempt,
      startedAt: o.startedAt.toISOString(),
      durationMs: Math.round(o.result.durationMs),
      statusCode: o.result.statusCode,
      error: o.result.error,
      responseExcerpt: o.result.responseExcerpt,
    })),
  );
  const mine = new Set(inserted);
  return judged.filter((o) => mine.has(`${o.row.id}/${o.row.endpoint_id}`));
}

async function updateDeliveries(trx: Knex.Transaction, ours: JudgedAttempt[]): Promise<void> {
  await updateDeliveryStates(
    trx,
    ours.map((o) => ({
      messageId: o.row.id,
      endpointId: o.row.endpoint_id,
      state: o.state,
      attempt: o.attempt,
      statusCode: o.result.statusCode,
      error: o.result.error,
      nextAttemptAt: o.nextAt?.toISOString() ?? null,
    })),
  );
}

/**
 * A success clears the endpoint's failures; a 410 disables it; a failure long enough after the last
 * success too. Each change of state stores its operational message for the owner's other endpoints
 * (`endpoint.recovered`, `endpoint.disabled`, `message.attempt.failing`, `message.attempt.exhausted`);
 * attempts of operational messages store no `message.attempt.*` one, so two failing endpoints never
 * feed each other.
 */
async function updateEndpoints(trx: Knex.Transaction, ours: JudgedAttempt[], disableAfterMs: number): Promise<void> {
  const succeeded = [...new Set(ours.filter((o) => o.succeeded).map((o) => o.row.endpoint_id))];
  if (succeeded.length > 0) {
    for (const endpoint of await clearEndpointFailures(trx, succeeded)) {
      await operational(trx, endpoint, 'endpoint.recovered', { failing_since: iso(endpoint.failing_since) });
    }
  }
  // Endpoints locked in one order by every transaction (a fetch's attempts reach the same endpoints in any order).
  for (const o of [...ours].sort((a, b) => (a.row.endpoint_id < b.row.endpoint_id ? -1 : a.row.endpoint_id > b.row.endpoint_id ? 1 : 0))) {
    const aboutMessage = !OPERATIONAL_TYPES.has(o.row.type);
    if (o.gone) {
      const endpoint = await disableGoneEndpoint(trx, o.row.endpoint_id);
      if (endpoint) await operational(trx, endpoint, 'endpoint.disabled', { reason: 'The receiver answered 410 Gone', failing_since: iso(endpoint.failing_since) });
    } else if (!o.succeeded && !o.row.disabled) {
      const endpoint = await recordEndpointFailure(trx, o.row.endpoint_id, o.startedAt.toISOString(), disableAfterMs);
      if (endpoint?.first_failure && aboutMessage) await operational(trx, endpoint, 'message.attempt.failing', attemptData(o));
      if (endpoint?.disabled_now) await operational(trx, endpoint, 'endpoint.disabled', { reason: endpoint.disabled_reason, failing_since: iso(endpoint.failing_since) });
    }
    if (o.state === 'failed' && !o.row.disabled && aboutMessage) {
      await operational(trx, { id: o.row.endpoint_id, owner_id: o.row.owner_id, url: o.row.url, failing_since: null }, 'message.attempt.exhausted', attemptData(o));
    }
  }
}

function operational(trx: Knex.Transaction, endpoint: EndpointChange, type: string, data: Record<string, unknown>): Promise<void> {
  return insertOperationalMessage(trx, { ownerId: endpoint.owner_id, sourceEndpointId: endpoint.id, type, data: { endpoint_id: endpoint.id, url: endpoint.url, ...data } });
}

/** What `message.attempt.*` says of the attempt. */
function attemptData(o: JudgedAttempt): Record<string, unknown> {
  return { message_id: o.row.id, message_type: o.row.type, attempt: o.attempt, status_code: o.result.statusCode, error: o.result.error };
}

const iso = (value: Date | string | null): string | null => (value === null ? null : new Date(value).toISOString());

/** ±20 % around `ms`, so that receivers recovering from an outage are not hit by every retry at once. */
function jitter(ms: number): number {
  return Math.round(ms * (0.8 + Math.random() * 0.4));
}
