import { PgBoss } from 'pg-boss';
import type { EntityManager, Knex } from '@mikro-orm/postgresql';
import type { OutboundWebhookConfig } from '../config.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import type { Logger } from '../logger.ts';
import { queueAttempt } from './jobs.ts';
import { DELIVERY_SELECT, type EndpointRow, type MessageRow } from './mapper.ts';
import { post, type SendResult } from './http-sender.ts';
import { OutboundGate, type IngestPressure } from './ingest-pressure.ts';
import { DELIVERY_QUEUE, QUEUE_SCHEMA } from './queue-schema.ts';
import { signature } from './signing.ts';
import { RefusedTargetError, resolveTarget } from './target-guard.ts';
import { ENDPOINT_SECRET_PURPOSE } from './webhook-endpoint-service.ts';

/** A `conversation.events` body larger than this carries the events' ids only. */
export const MAX_EVENTS_BODY_BYTES = 256 * 1024;

/** Messages fanned out per transaction. */
const FANOUT_BATCH = 100;
/** Conversations whose owed `conversation.events` messages are made per statement. */
const OWED_BATCH = 100;
/**
 * Events of one conversation read per statement (a backlog is made in steps). A transaction is cut
 * at this size only when it alone stored more events of one conversation (group commit stores at
 * most `INGEST_GROUP_MAX_EVENTS`, 500, plus one batch).
 */
const OWED_EVENTS = 10_000;
/** Jobs one worker fetches at once and runs together (each a message to its endpoints, or a retry). */
const JOBS_PER_FETCH = 4;

/**
 * What one delivery job names: the first attempt of a message to every endpoint it was fanned out to
 * (`{message_id, attempt: 1}`, queued by the fan-out), or attempt `attempt` of a message to one
 * endpoint (a retry, `endpoint_id` set). `{"fanout": "pending"}` and `message_ids` are jobs queued
 * before Migration20261125080000_webhook_outbox; they are still honoured.
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

/** One attempt made, before it is recorded. */
interface Attempt {
  row: Row;
  attempt: number;
  startedAt: Date;
  result: SendResult;
  refused: boolean;
}

/**
 * Delivers queued messages: fans the outbox out, and fetches jobs in `concurrency` loops; pg-boss
 * hands each job to one loop of one instance (its `SKIP LOCKED` fetch). A job's outcomes and the next
 * attempts' jobs are one transaction, and the job is completed after it. A process killed during an
 * attempt leaves the job `active`; pg-boss expires it after `expire_seconds` and hands it out again,
 * so the attempt is made again, never lost.
 */
export class DeliveryWorker {
  private boss: PgBoss | undefined;
  private running = false;
  private loops: Promise<void>[] = [];
  /** Idle fetch loops, woken when the fan-out has queued jobs. */
  private readonly idlers = new Set<() => void>();
  private dispatchTimer: NodeJS.Timeout | undefined;
  private dispatching: Promise<void> | undefined;
  private readonly gate: OutboundGate;

  /** `pressure`: this instance's webhook ingestion, which delivery yields to when busy (see ingest-pressure.ts). */
  constructor(
    private readonly em: EntityManager,
    private readonly databaseUrl: string,
    private readonly box: SecretBox,
    private readonly config: OutboundWebhookConfig,
    private readonly log: Logger,
    private readonly observer?: DeliveryObserver,
    pressure?: IngestPressure,
  ) {
    this.gate = new OutboundGate(pressure);
  }

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
    this.running = true;
    this.loops = Array.from({ length: this.config.concurrency }, () => this.fetchLoop());
    this.scheduleDispatch(0);
    this.log.info({ concurrency: this.config.concurrency, dispatchMs: this.config.dispatchMs }, 'webhook delivery worker started');
  }

  /**
   * One of `concurrency` loops: takes its turn at the gate, then fetches up to `JOBS_PER_FETCH` jobs
   * (pg-boss's `SKIP LOCKED` fetch), runs them together, and completes or fails each. Jobs are fetched
   * only once the turn has come, so none waits at the gate while pg-boss counts down its expiry. An
   * empty or short fetch rests `pollMs`, or until the fan-out queues jobs.
   */
  private async fetchLoop(): Promise<void> {
    while (this.running) {
      let fetched = 0;
      try {
        fetched = await this.gate.run(async () => {
          const jobs = this.running && this.boss ? await this.boss.fetch<DeliveryJob>(DELIVERY_QUEUE, { batchSize: JOBS_PER_FETCH }) : [];
          const outcomes = await Promise.allSettled(jobs.map((job) => this.run(job.data)));
          const done = jobs.filter((_, i) => outcomes[i]!.status === 'fulfilled').map((job) => job.id);
          if (done.length > 0) await this.boss!.complete(DELIVERY_QUEUE, done);
          for (const [i, outcome] of outcomes.entries()) {
            if (outcome.status === 'fulfilled') continue;
            this.log.error({ err: outcome.reason, jobId: jobs[i]!.id }, 'webhook delivery job failed; the queue retries it');
            await this.boss!.fail(DELIVERY_QUEUE, jobs[i]!.id, { message: String((outcome.reason as Error)?.message ?? outcome.reason) });
          }
          return jobs.length;
        });
      } catch (error) {
        if (this.running) this.log.error({ err: error }, 'webhook queue fetch failed');
      }
      if (fetched < JOBS_PER_FETCH && this.running) await this.rest();
    }
  }

  private rest(): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.idlers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, this.config.pollMs);
      this.idlers.add(wake);
    });
  }

  private wakeIdlers(): void {
    for (const wake of [...this.idlers]) wake();
  }

  /** `{fanout}` jobs of earlier versions: the outbox poll fans their messages out, so they are done. */
  private async run(job: DeliveryJob): Promise<void> {
    if (job.fanout !== undefined) return;
    const ids = job.message_ids ?? [job.message_id!];
    await Promise.all(ids.map((id) => this.deliver({ message_id: id, endpoint_id: job.endpoint_id, attempt: job.attempt ?? 1 })));
  }

  /** Stops fanning out and fetching, waits for attempts in flight (up to `graceMs`), closes the pool. */
  async stop(graceMs = 10_000): Promise<void> {
    this.running = false;
    clearTimeout(this.dispatchTimer);
    this.dispatchTimer = undefined;
    this.wakeIdlers();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all([this.dispatching, ...this.loops]), new Promise((resolve) => (timer = setTimeout(resolve, graceMs)))]);
    clearTimeout(timer);
    this.loops = [];
    await this.boss?.stop({ graceful: true, timeout: graceMs });
    this.boss = undefined;
  }

  /**
   * The outbox poll: every `dispatchMs`, fan out what the ingest transactions stored, then wake this
   * instance's workers at once rather than at their next poll.
   */
  private scheduleDispatch(delayMs: number): void {
    this.dispatchTimer = setTimeout(() => {
      this.dispatching = this.fanOutPending()
        .then((count) => {
          if (count > 0) this.wakeIdlers();
        })
        .catch((error: unknown) => this.log.error({ err: error }, 'webhook fan-out failed'))
        .finally(() => {
          this.dispatching = undefined;
          if (this.running) this.scheduleDispatch(this.config.dispatchMs);
        });
    }, delayMs);
  }

  /**
   * Expands every message not fanned out yet into one delivery per endpoint that wants it — enabled,
   * created no later than the message, its event types and conversation matching — and queues one
   * job per message for the first attempt to all of them; `FANOUT_BATCH` messages per transaction,
   * locked with `SKIP LOCKED` so that instances fanning out at once share them, each message once
   * (`fanned_out`). Messages no endpoint wants any more are marked without a job. Returns how many
   * messages it fanned out.
   */
  async fanOutPending(): Promise<number> {
    const knex = this.em.getConnection().getKnex();
    // Until fewer than a full batch is owed, or a mark did not move (a row an ingest held: next time).
    for (let made = { read: OWED_BATCH, moved: OWED_BATCH }; made.read === OWED_BATCH && made.moved === made.read; ) {
      made = await this.gate.run(() => this.makeOwedEventMessages());
    }
    let total = 0;
    for (;;) {
      const count = await this.gate.run(() => knex.transaction(async (trx) => {
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
           select q.name, jsonb_build_object('message_id', d.message_id, 'attempt', 1),
                  q.retry_limit, q.retry_delay, q.expire_seconds, q.policy
           from (select distinct message_id from deliveries) d cross join ${QUEUE_SCHEMA}.queue q where q.name = ?`,
          [ids, DELIVERY_QUEUE],
        );
        await trx.raw('update webhook_messages set fanned_out = true where id = any (?::text[])', [ids]);
        return ids.length;
      }));
      total += count;
      if (count < FANOUT_BATCH) return total;
    }
  }

  /**
   * Makes the `conversation.events` messages that conversations owe (`webhook_events_from`, set by the
   * ingest transaction: Migration20261127010000_webhook_events_marker), for up to `OWED_BATCH`
   * conversations and `maxEvents` events of each: one message per transaction that stored their events (runs of one `xmin`), stamped
   * with that transaction's time, its id derived from the conversation and its first sequence number,
   * so that making it twice (another instance, a crash before the mark moved) stores it once. Then
   * moves each mark past what was made, in id order and skipping rows an ingest holds (never waiting
   * on one, never deadlocking with one): those are made again, as the same messages, next time.
   * Returns how many conversations it read, and how many marks it moved.
   */
  async makeOwedEventMessages(maxEvents = OWED_EVENTS): Promise<{ read: number; moved: number }> {
    const knex = this.em.getConnection().getKnex();
    const owed = (
      await knex.raw(
        `with owed as (
           select c.id, c.owner_id, c.created_at, c.event_count, c.webhook_events_from as from_seq,
             least(c.event_count, c.webhook_events_from + ? - 1) as to_seq
           from conversations c where c.webhook_events_from is not null limit ?
         ),
         events as (
           select o.id as conversation_id, o.owner_id, o.created_at as conversation_created_at, e.seq, e.received_at,
             case when e.xmin = lag(e.xmin) over (partition by o.id order by e.seq) then 0 else 1 end as starts
           from owed o join conversation_events e on e.conversation_id = o.id and e.seq between o.from_seq and o.to_seq
         ),
         runs as (
           select *, sum(starts) over (partition by conversation_id order by seq) as run from events
         ),
         batches as (
           select r.conversation_id, r.owner_id, r.conversation_created_at, r.run, max(r.run) over (partition by r.conversation_id) as last_run,
             min(r.seq) as from_seq, max(r.seq) as to_seq, min(r.received_at) as created_at
           from runs r group by r.conversation_id, r.owner_id, r.conversation_created_at, r.run
         ),
         kept as (
           -- The last transaction of a range cut at the cap may go on past it: made whole next time.
           select b.* from batches b join owed o on o.id = b.conversation_id
           where not (o.to_seq < o.event_count and b.run = b.last_run and b.last_run > 1)
         ),
         made as (
           insert into webhook_messages (id, owner_id, conversation_id, type, data, created_at)
           -- The conversation's creation time too: a conversation deleted and sent again starts at seq 1 again.
           select 'msg_' || md5(k.conversation_id::text || '/' || (extract(epoch from k.conversation_created_at) * 1000000)::bigint || '/' || k.from_seq),
             k.owner_id, k.conversation_id, 'conversation.events',
             jsonb_build_object('conversation_id', k.conversation_id, 'from_seq', k.from_seq, 'to_seq', k.to_seq), k.created_at
           from kept k
           on conflict (id) do nothing
         )
         select o.id, o.from_seq, coalesce(max(k.to_seq), o.to_seq) as to_seq
         from owed o left join kept k on k.conversation_id = o.id group by o.id, o.from_seq, o.to_seq`,
        [maxEvents, OWED_BATCH],
      )
    ).rows as { id: string; from_seq: number; to_seq: number }[];
    if (owed.length === 0) return { read: 0, moved: 0 };
    const moved = await knex.raw(
      `with made as (select * from unnest(?::uuid[], ?::integer[], ?::integer[]) as m(id, from_seq, to_seq)),
       locked as (
         select c.id, m.to_seq from conversations c join made m on m.id = c.id and c.webhook_events_from = m.from_seq
         order by c.id for update of c skip locked
       )
       update conversations c set webhook_events_from = case when c.event_count > l.to_seq then l.to_seq + 1 end
       from locked l where c.id = l.id`,
      [owed.map((o) => o.id), owed.map((o) => o.from_seq), owed.map((o) => o.to_seq)],
    );
    return { read: owed.length, moved: (moved as { rowCount: number }).rowCount };
  }

  /**
   * Makes attempt `job.attempt` of the message to the endpoint unless it was made already (by another
   * instance, or before a crash). Without `endpoint_id` (a first attempt), to each of the message's
   * deliveries, in parallel, with the body read once.
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
    let body: Promise<string> | undefined;
    const bodyOnce = (row: Row) => (body ??= this.bodyOf(row));
    const made = await Promise.all(rows.map((row) => this.attempt(row, job.attempt, bodyOnce)));
    await this.record(made.filter((outcome) => outcome !== undefined));
  }

  /** Makes the attempt unless it was made already; what it gave, to be recorded. */
  private async attempt(row: Row, attempt: number, bodyOf: (row: Row) => Promise<string>): Promise<Attempt | undefined> {
    if (row.attempts >= attempt || (row.state !== 'pending' && row.attempts + 1 !== attempt)) return undefined;
    const startedAt = new Date();
    let result: SendResult;
    let refused = false;
    if (row.disabled && row.type !== 'webhook.test') {
      result = { statusCode: null, error: 'The endpoint is disabled', responseExcerpt: null, durationMs: 0 };
      refused = true;
    } else {
      result = await this.send(row, bodyOf);
      refused = result.statusCode === null && result.error?.startsWith('Refused:') === true;
    }
    return { row, attempt, startedAt, result, refused };
  }

  private async send(row: Row, bodyOf: (row: Row) => Promise<string>): Promise<SendResult> {
    const url = new URL(row.url);
    let target: { address: string; family: 4 | 6 };
    try {
      if (url.protocol === 'http:' && !this.config.allowHttp) throw new RefusedTargetError('http:// targets are not allowed');
      target = await resolveTarget(url, this.config.allowPrivate);
    } catch (error) {
      const reason = error instanceof RefusedTargetError ? error.message : `cannot resolve ${url.hostname}`;
      return { statusCode: null, error: `Refused: ${reason}`, responseExcerpt: null, durationMs: 0 };
    }
    const body = await bodyOf(row);
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

  /**
   * Records the attempts of one job (one message; several endpoints for a first attempt) in one
   * transaction of set-based statements: the attempt rows, the deliveries' states, the next attempt's
   * job of each that will be retried, and the endpoints' failure bookkeeping. An attempt another
   * worker recorded first is left out.
   */
  private async record(made: Attempt[]): Promise<void> {
    if (made.length === 0) return;
    const knex = this.em.getConnection().getKnex();
    const schedule = this.config.retryScheduleMs;
    const outcomes = made.map(({ row, attempt, startedAt, result, refused }) => {
      const succeeded = result.error === null;
      const gone = result.statusCode === 410;
      const more = !succeeded && !gone && attempt < schedule.length;
      const nextAt = more ? new Date(Date.now() + jitter(schedule[attempt]!)) : null;
      const outcome: AttemptOutcome = succeeded ? 'succeeded' : gone ? 'gone' : refused && !more ? 'refused' : more ? 'retrying' : 'failed';
      const state = succeeded ? 'succeeded' : more ? 'pending' : 'failed';
      return { row, attempt, startedAt, result, succeeded, gone, more, nextAt, outcome, state };
    });
    const messageId = made[0]!.row.id;
    const recorded = await knex.transaction(async (trx) => {
      const inserted = (
        await trx.raw(
          `insert into webhook_attempts (message_id, endpoint_id, attempt, started_at, duration_ms, status_code, error, response_excerpt)
           select ?, a.* from unnest(?::uuid[], ?::integer[], ?::timestamptz[], ?::integer[], ?::integer[], ?::text[], ?::text[]) as a
           on conflict do nothing returning endpoint_id`,
          pgBindings(
            messageId,
            outcomes.map((o) => o.row.endpoint_id),
            outcomes.map((o) => o.attempt),
            outcomes.map((o) => o.startedAt.toISOString()),
            outcomes.map((o) => Math.round(o.result.durationMs)),
            outcomes.map((o) => o.result.statusCode),
            outcomes.map((o) => o.result.error),
            outcomes.map((o) => o.result.responseExcerpt),
          ),
        )
      ).rows as { endpoint_id: string }[];
      const mine = new Set(inserted.map((r) => r.endpoint_id));
      const ours = outcomes.filter((o) => mine.has(o.row.endpoint_id));
      if (ours.length === 0) return ours;
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
      for (const o of ours) if (o.more) await queueAttempt(trx, messageId, o.row.endpoint_id, o.attempt + 1, o.nextAt!);
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
            [since, since, this.config.disableAfterMs, since, this.config.disableAfterMs, o.row.endpoint_id],
          );
        }
      }
      return ours;
    });
    for (const o of recorded) {
      this.observer?.attempt(o.row.type, o.outcome, o.result.durationMs / 1000);
      this.log.info(
        { messageId, endpointId: o.row.endpoint_id, type: o.row.type, attempt: o.attempt, statusCode: o.result.statusCode, outcome: o.outcome, ms: o.result.durationMs },
        'webhook attempt',
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

const workers = new WeakMap<object, DeliveryWorker>();

/** Remembers the delivery worker of an app built by `createApp` (started by `main.ts`, or a test). */
export function registerDeliveryWorker(app: object, worker: DeliveryWorker): void {
  workers.set(app, worker);
}

/** The delivery worker of an app built by `createApp`. */
export function deliveryWorkerOf(app: object): DeliveryWorker | undefined {
  return workers.get(app);
}
