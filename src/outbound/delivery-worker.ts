import { PgBoss, type Job } from 'pg-boss';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { OutboundWebhookConfig } from '../config.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import type { Logger } from '../logger.ts';
import { queueAttempt } from './jobs.ts';
import { DELIVERY_SELECT, type EndpointRow, type MessageRow } from './mapper.ts';
import { post, type SendResult } from './http-sender.ts';
import { DELIVERY_QUEUE, QUEUE_SCHEMA } from './queue-schema.ts';
import { signature } from './signing.ts';
import { RefusedTargetError, resolveTarget } from './target-guard.ts';
import { ENDPOINT_SECRET_PURPOSE } from './webhook-endpoint-service.ts';

/** A `conversation.events` body larger than this carries the events' ids only. */
export const MAX_EVENTS_BODY_BYTES = 256 * 1024;

/** Messages fanned out per transaction. */
const FANOUT_BATCH = 100;

/**
 * What one delivery job names: `{"fanout": "pending"}`, queued by `webhook_enqueue` once per
 * transaction that stored messages (fan out every message not fanned out yet), or attempt `attempt`
 * of a message to one endpoint. Jobs
 * queued before the fan-out migration name a message (or several, `message_ids`) without an
 * endpoint: each such message has exactly one delivery.
 */
interface DeliveryJob {
  fanout?: string;
  message_id?: string;
  message_ids?: string[];
  endpoint_id?: string;
  attempt?: number;
}

/** How an attempt ended, for the metrics. */
export type AttemptOutcome = 'succeeded' | 'retrying' | 'failed' | 'gone' | 'refused';

export interface DeliveryObserver {
  attempt(type: string, outcome: AttemptOutcome, seconds: number): void;
}

type Row = MessageRow & Pick<EndpointRow, 'url' | 'secret' | 'previous_secret' | 'previous_secret_until' | 'disabled'>;

/**
 * Delivers queued messages: pg-boss hands each attempt's job to one worker of one instance (its
 * `SKIP LOCKED` fetch); an attempt's outcome, the next attempt's job and the job's completion are
 * one transaction. A process killed during an attempt leaves the job `active`; pg-boss expires it
 * after `expire_seconds` and hands it out again, so the attempt is made again, never lost.
 */
export class DeliveryWorker {
  private boss: PgBoss | undefined;

  constructor(
    private readonly em: EntityManager,
    private readonly databaseUrl: string,
    private readonly box: SecretBox,
    private readonly config: OutboundWebhookConfig,
    private readonly log: Logger,
    private readonly observer?: DeliveryObserver,
  ) {}

  /** Seconds after which an attempt's job that was not completed (its process died) is handed out again. */
  get expireSeconds(): number {
    return Math.ceil(this.config.timeoutMs / 1000) + 2;
  }

  /** Starts pg-boss on its own small pool of direct connections (the database's listen URL) and the workers. */
  async start(): Promise<void> {
    const expire = this.expireSeconds;
    const boss = new PgBoss({
      connectionString: this.databaseUrl,
      schema: QUEUE_SCHEMA,
      max: Math.min(this.config.concurrency + 2, 20),
      application_name: 'agent-platform-webhooks',
      schedule: false,
      superviseIntervalSeconds: Math.min(60, expire),
      monitorIntervalSeconds: Math.min(60, expire),
    });
    boss.on('error', (error) => this.log.error({ err: error }, 'webhook queue error'));
    this.boss = boss;
    await boss.start();
    await boss.updateQueue(DELIVERY_QUEUE, { expireInSeconds: expire, retryLimit: 5, retryDelay: 1 });
    await boss.work<DeliveryJob>(
      DELIVERY_QUEUE,
      { localConcurrency: this.config.concurrency, batchSize: 1, pollingIntervalSeconds: this.config.pollMs / 1000 },
      async (jobs: Job<DeliveryJob>[]) => {
        for (const job of jobs) {
          if (job.data.fanout !== undefined) {
            await this.fanOutPending();
            continue;
          }
          const ids = job.data.message_ids ?? [job.data.message_id!];
          await Promise.all(ids.map((id) => this.deliver({ message_id: id, endpoint_id: job.data.endpoint_id, attempt: job.data.attempt ?? 1 })));
        }
      },
    );
    this.log.info({ concurrency: this.config.concurrency }, 'webhook delivery worker started');
  }

  /** Stops fetching, waits for attempts in flight (up to `graceMs`), closes the pool. */
  async stop(graceMs = 10_000): Promise<void> {
    await this.boss?.stop({ graceful: true, timeout: graceMs });
    this.boss = undefined;
  }

  /**
   * Expands every message not fanned out yet into one delivery per endpoint that wants it — enabled,
   * created no later than the message, its event types and conversation matching — and queues one
   * job per delivery for its first attempt; `FANOUT_BATCH` messages per transaction, locked with
   * `SKIP LOCKED` so that instances fanning out at once share them, each message once (`fanned_out`).
   * A job handed out again after a crash finds what is left; one whose messages another job took
   * finds nothing. Returns how many messages it fanned out.
   */
  async fanOutPending(): Promise<number> {
    const knex = this.em.getConnection().getKnex();
    let total = 0;
    for (;;) {
      const count = await knex.transaction(async (trx) => {
        const ids = (
          (await trx.raw(
            'select id from webhook_messages where not fanned_out order by created_at limit ? for update skip locked',
            [FANOUT_BATCH],
          )).rows as { id: string }[]
        ).map((r) => r.id);
        if (ids.length === 0) return 0;
        await trx.raw(
          `with deliveries as (
             insert into webhook_deliveries (message_id, endpoint_id, next_attempt_at, created_at)
             select m.id, e.id, now(), m.created_at
             from webhook_messages m join webhook_endpoints e on e.owner_id = m.owner_id
             where m.id = any (?::text[]) and not e.disabled and e.created_at <= m.created_at
               and (e.event_types is null or m.type = any (e.event_types))
               and (e.conversation_id is null or e.conversation_id = m.conversation_id)
             on conflict do nothing
             returning message_id, endpoint_id
           )
           insert into ${QUEUE_SCHEMA}.job (name, data, retry_limit, retry_delay, expire_seconds, policy)
           select q.name, jsonb_build_object('message_id', d.message_id, 'endpoint_id', d.endpoint_id, 'attempt', 1),
                  q.retry_limit, q.retry_delay, q.expire_seconds, q.policy
           from deliveries d cross join ${QUEUE_SCHEMA}.queue q where q.name = ?`,
          [ids, DELIVERY_QUEUE],
        );
        await trx.raw('update webhook_messages set fanned_out = true where id = any (?::text[])', [ids]);
        return ids.length;
      });
      total += count;
      if (count < FANOUT_BATCH) return total;
    }
  }

  /**
   * Makes attempt `job.attempt` of the message to the endpoint unless it was made already (by another
   * instance, or before a crash). Without `endpoint_id` (a job queued before the fan-out migration), to
   * each of the message's deliveries.
   */
  async deliver(job: { message_id: string; endpoint_id?: string; attempt: number }): Promise<void> {
    const knex = this.em.getConnection().getKnex();
    const rows = (
      await knex.raw(
        `select q.*, e.url, e.secret, e.previous_secret, e.previous_secret_until, e.disabled
         from (${DELIVERY_SELECT}) q join webhook_endpoints e on e.id = q.endpoint_id
         where q.id = ? and (?::uuid is null or q.endpoint_id = ?::uuid)`,
        [job.message_id, job.endpoint_id ?? null, job.endpoint_id ?? null],
      )
    ).rows as Row[];
    await Promise.all(rows.map((row) => this.attempt(row, job.attempt)));
  }

  private async attempt(row: Row, attempt: number): Promise<void> {
    if (row.attempts >= attempt || (row.state !== 'pending' && row.attempts + 1 !== attempt)) return;
    const startedAt = new Date();
    let result: SendResult;
    let refused = false;
    if (row.disabled && row.type !== 'webhook.test') {
      result = { statusCode: null, error: 'The endpoint is disabled', responseExcerpt: null, durationMs: 0 };
      refused = true;
    } else {
      result = await this.send(row);
      refused = result.statusCode === null && result.error?.startsWith('Refused:') === true;
    }
    await this.record(row, attempt, startedAt, result, refused);
  }

  private async send(row: Row): Promise<SendResult> {
    const url = new URL(row.url);
    let target: { address: string; family: 4 | 6 };
    try {
      if (url.protocol === 'http:' && !this.config.allowHttp) throw new RefusedTargetError('http:// targets are not allowed');
      target = await resolveTarget(url, this.config.allowPrivate);
    } catch (error) {
      const reason = error instanceof RefusedTargetError ? error.message : `cannot resolve ${url.hostname}`;
      return { statusCode: null, error: `Refused: ${reason}`, responseExcerpt: null, durationMs: 0 };
    }
    const body = await this.bodyOf(row);
    const timestamp = Math.floor(Date.now() / 1000);
    const secrets = [row.secret];
    if (row.previous_secret && row.previous_secret_until && new Date(row.previous_secret_until) > new Date()) secrets.push(row.previous_secret);
    let signatures: string[];
    try {
      signatures = secrets.map((secret) => signature(this.box.decrypt(secret, ENDPOINT_SECRET_PURPOSE), row.id, timestamp, body));
    } catch (error) {
      // A keyring without the key the secret was encrypted with: nothing unsigned ever leaves.
      this.log.error({ err: error, endpointId: row.endpoint_id }, 'webhook endpoint secret cannot be decrypted');
      return { statusCode: null, error: 'The endpoint secret cannot be decrypted with the configured keys', responseExcerpt: null, durationMs: 0 };
    }
    const headers = { 'webhook-id': row.id, 'webhook-timestamp': String(timestamp), 'webhook-signature': signatures.join(' ') };
    return post(url, target, headers, body, this.config.timeoutMs);
  }

  /** `{"type", "timestamp", "data"}`, the same bytes on every attempt (stored events do not change). */
  private async bodyOf(row: Row): Promise<string> {
    const head = `{"type":${JSON.stringify(row.type)},"timestamp":${JSON.stringify(new Date(row.created_at).toISOString())},"data":`;
    if (row.type !== 'conversation.events') return `${head}${JSON.stringify(row.data)}}`;
    const { conversation_id, from_seq, to_seq } = row.data as { conversation_id: string; from_seq: number; to_seq: number };
    const knex = this.em.getConnection().getKnex();
    const events = (
      await knex.raw(
        `select event_id, payload::text as payload from conversation_events
         where conversation_id = ? and seq between ? and ? order by seq`,
        [conversation_id, from_seq, to_seq],
      )
    ).rows as { event_id: string; payload: string }[];
    const range = `"conversation_id":${JSON.stringify(conversation_id)},"from_seq":${from_seq},"to_seq":${to_seq}`;
    const size = events.reduce((total, e) => total + Buffer.byteLength(e.payload) + 1, 0);
    if (size > MAX_EVENTS_BODY_BYTES) {
      return `${head}{${range},"event_ids":${JSON.stringify(events.map((e) => e.event_id))}}}`;
    }
    // Each event goes as the JSON text that was stored, byte for byte (see src/lossless-json.ts).
    return `${head}{${range},"events":[${events.map((e) => e.payload).join(',')}]}}`;
  }

  private async record(row: Row, attempt: number, startedAt: Date, result: SendResult, refused: boolean): Promise<void> {
    const knex = this.em.getConnection().getKnex();
    const schedule = this.config.retryScheduleMs;
    const succeeded = result.error === null;
    const gone = result.statusCode === 410;
    const more = !succeeded && !gone && attempt < schedule.length;
    const nextAt = more ? new Date(Date.now() + jitter(schedule[attempt]!)) : null;
    const outcome: AttemptOutcome = succeeded ? 'succeeded' : gone ? 'gone' : refused && !more ? 'refused' : more ? 'retrying' : 'failed';
    await knex.transaction(async (trx) => {
      const inserted = await trx.raw(
        `insert into webhook_attempts (message_id, endpoint_id, attempt, started_at, duration_ms, status_code, error, response_excerpt)
         values (?, ?, ?, ?, ?, ?, ?, ?) on conflict do nothing returning attempt`,
        [row.id, row.endpoint_id, attempt, startedAt.toISOString(), result.durationMs, result.statusCode, result.error, result.responseExcerpt],
      );
      if (inserted.rows.length === 0) return; // another worker recorded this attempt first
      await trx.raw(
        `update webhook_deliveries set state = ?, attempts = greatest(attempts, ?), last_status_code = ?, last_error = ?, next_attempt_at = ?
         where message_id = ? and endpoint_id = ?`,
        [succeeded ? 'succeeded' : more ? 'pending' : 'failed', attempt, result.statusCode, result.error, nextAt?.toISOString() ?? null, row.id, row.endpoint_id],
      );
      if (more) await queueAttempt(trx, row.id, row.endpoint_id, attempt + 1, nextAt!);
      if (succeeded) {
        await trx.raw('update webhook_endpoints set failing_since = null where id = ? and failing_since is not null', [row.endpoint_id]);
      } else if (gone) {
        await trx.raw(
          `update webhook_endpoints set disabled = true, disabled_reason = 'The receiver answered 410 Gone', updated_at = now() where id = ?`,
          [row.endpoint_id],
        );
      } else if (!row.disabled) {
        // Failing since the first failure after the last success; disabled once that is long enough.
        await trx.raw(
          `update webhook_endpoints set failing_since = coalesce(failing_since, ?::timestamptz),
             disabled = coalesce(failing_since, ?::timestamptz) <= now() - (? * interval '1 millisecond'),
             disabled_reason = case when coalesce(failing_since, ?::timestamptz) <= now() - (? * interval '1 millisecond')
               then 'Every attempt failed for too long' else disabled_reason end,
             updated_at = now()
           where id = ?`,
          [startedAt.toISOString(), startedAt.toISOString(), this.config.disableAfterMs, startedAt.toISOString(), this.config.disableAfterMs, row.endpoint_id],
        );
      }
    });
    this.observer?.attempt(row.type, outcome, result.durationMs / 1000);
    this.log.info(
      { messageId: row.id, endpointId: row.endpoint_id, type: row.type, attempt, statusCode: result.statusCode, outcome, ms: result.durationMs },
      'webhook attempt',
    );
  }
}

/** ±20 % around `ms`, so that receivers recovering from an outage are not hit by every retry at once. */
function jitter(ms: number): number {
  return Math.round(ms * (0.8 + Math.random() * 0.4));
}

const workers = new WeakMap<object, DeliveryWorker>();

/** Remembers the delivery worker of an app built by `createApp` (started by `main.ts`, or a test). */
export function registerDeliveryWorker(app: object, worker: DeliveryWorker): void {
  workers.set(app, worker);
}

/** The delivery worker of an app built by `createApp`. */
export function deliveryWorkerOf(app: object): DeliveryWorker | undefined {
  return workers.get(app);
}
