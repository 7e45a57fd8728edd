import { PgBoss } from 'pg-boss';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { OutboundWebhookConfig } from '../config.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import type { Logger } from '../logger.ts';
import { AttemptMaker } from './attempt.ts';
import { isDatabaseUnavailable } from '../db/errors.ts';
import { OutageLog, type OutageObserver } from '../observability/outage-log.ts';
import { Deliverer, type DeliveryObserver } from './delivery.ts';
import { OutboundGate, type Pressure } from './ingest-pressure.ts';
import type { DeliveryJob, OutboundQueue } from './outbound-queue.ts';
import { FANOUT_BATCH, OWED_BATCH, OWED_EVENTS, fanOutBatch, makeOwedEventMessages } from './outbox.ts';
import { DELIVERY_QUEUE, QUEUE_SCHEMA } from './queue-schema.ts';
import { RecoveryRunner } from './recovery.ts';

/**
 * Jobs one worker fetches at once and runs together (each a message to its endpoints, or a retry), read and
 * recorded in one statement each. A fetch's time is mostly waiting on the receivers and the database, and a
 * pressed webhook's rest is charged on that time: 32 jobs deliver more in the same turn than 16.
 */
const JOBS_PER_FETCH = 32;

/**
 * Delivers queued messages: polls the outbox every `dispatchMs` and runs `concurrency` fetch loops,
 * each behind the gate that yields to ingestion (docs/outbound-webhooks.md, "How it works").
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
  private readonly deliverer: Deliverer;
  private readonly recovery: RecoveryRunner;
  /** The queue's fetch loops (and pg-boss's own upkeep) and the outbox fan-out each log an outage once. */
  private readonly queueOutage: OutageLog;
  private readonly fanOutOutage: OutageLog;

  /** `pressure`: this instance's webhook ingestion, which delivery yields to when busy (see ingest-pressure.ts). */
  constructor(
    private readonly em: EntityManager,
    private readonly queue: OutboundQueue,
    private readonly databaseUrl: string,
    box: SecretBox,
    private readonly config: OutboundWebhookConfig,
    private readonly log: Logger,
    observer?: DeliveryObserver,
    pressure?: Pressure,
    outageObserver?: OutageObserver,
  ) {
    this.gate = new OutboundGate(pressure);
    this.deliverer = new Deliverer(em, queue, box, config, log, observer);
    this.queueOutage = new OutageLog('webhook queue', 'fetches failed', log, outageObserver);
    this.fanOutOutage = new OutageLog('webhook fan-out', 'runs failed', log, outageObserver);
    this.recovery = new RecoveryRunner(em, queue, new AttemptMaker(box, config, log), this.gate, config, log, this.fanOutOutage);
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
    boss.on('error', (error) => {
      if (isDatabaseUnavailable(error)) this.queueOutage.failed(error);
      else this.log.error({ err: error }, 'webhook queue error');
    });
    this.boss = boss;
    await boss.start();
    await boss.updateQueue(DELIVERY_QUEUE, { expireInSeconds: expire, retryLimit: 5, retryDelay: 1 });
    this.running = true;
    this.loops = Array.from({ length: this.config.concurrency }, () => this.fetchLoop());
    this.scheduleDispatch(0);
    this.log.info({ concurrency: this.config.concurrency, dispatchMs: this.config.dispatchMs }, 'webhook delivery worker started');
  }

  /** Stops fanning out and fetching, waits for attempts in flight (up to `graceMs`), closes the pool. */
  async stop(graceMs = 10_000): Promise<void> {
    this.running = false;
    clearTimeout(this.dispatchTimer);
    this.dispatchTimer = undefined;
    this.wakeIdlers();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all([this.dispatching, this.recovery.stopped(), ...this.loops]), new Promise((resolve) => (timer = setTimeout(resolve, graceMs)))]);
    clearTimeout(timer);
    this.loops = [];
    await this.boss?.stop({ graceful: true, timeout: graceMs });
    this.boss = undefined;
  }

  /**
   * Fans out what the ingest transactions stored: a step of owed `conversation.events` messages, then the
   * outbox, waking the idle fetch loops, until fewer than a full step is owed (rows an ingest held are made
   * next time). A step at a time, so a backlog of thousands of conversations starts going out after its
   * first step, not after all of them. Returns how many messages.
   */
  async fanOutPending(): Promise<number> {
    const knex = this.em.getConnection().getKnex();
    let total = 0;
    for (;;) {
      const made = await this.gate.run(() => this.makeOwedEventMessages(), true);
      let fanned = 0;
      for (;;) {
        const count = await this.gate.run(() => fanOutBatch(knex, this.queue), true);
        fanned += count;
        if (count < FANOUT_BATCH) break;
      }
      if (fanned > 0) this.wakeIdlers();
      total += fanned;
      if (made < OWED_BATCH) return total;
    }
  }

  /** One step of making owed `conversation.events` messages (see outbox.ts); returns for how many conversations. */
  makeOwedEventMessages(maxEvents = OWED_EVENTS): Promise<number> {
    return makeOwedEventMessages(this.em, maxEvents);
  }

  /**
   * One of `concurrency` loops: its turn at the gate first, then a fetch of up to `JOBS_PER_FETCH`
   * jobs run together, so no fetched job waits at the gate while pg-boss counts down its expiry.
   */
  private async fetchLoop(): Promise<void> {
    while (this.running) {
      let fetched = 0;
      try {
        fetched = await this.gate.run(() => this.runFetched());
        this.queueOutage.succeeded();
      } catch (error) {
        if (!this.running) break;
        if (isDatabaseUnavailable(error)) this.queueOutage.failed(error);
        else this.log.error({ err: error }, 'webhook queue fetch failed');
      }
      if (fetched < JOBS_PER_FETCH && this.running) await this.rest();
    }
  }

  /** Fetches jobs, delivers them, completes or fails each; returns how many it fetched. */
  private async runFetched(): Promise<number> {
    const boss = this.boss;
    const jobs = this.running && boss ? await boss.fetch<DeliveryJob>(DELIVERY_QUEUE, { batchSize: JOBS_PER_FETCH }) : [];
    if (jobs.length === 0) return 0;
    const outcomes = await this.deliverer.deliverAll(jobs.map((job) => job.data)).catch((error: unknown) => jobs.map(() => ({ status: 'rejected' as const, reason: error })));
    const done = jobs.filter((_, i) => outcomes[i]!.status === 'fulfilled').map((job) => job.id);
    if (done.length > 0) await boss!.complete(DELIVERY_QUEUE, done);
    for (const [i, outcome] of outcomes.entries()) {
      if (outcome.status === 'fulfilled') continue;
      if (isDatabaseUnavailable(outcome.reason)) this.queueOutage.failed(outcome.reason);
      else this.log.error({ err: outcome.reason, jobId: jobs[i]!.id }, 'webhook delivery job failed; the queue retries it');
      await boss!.fail(DELIVERY_QUEUE, jobs[i]!.id, { message: String((outcome.reason as Error)?.message ?? outcome.reason) });
    }
    return jobs.length;
  }

  /** Waits `pollMs`, or until the fan-out wakes it. */
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

  /** The outbox poll: every `dispatchMs`, fan out (which wakes this instance's idle loops at once); and look for a recovery to run. */
  private scheduleDispatch(delayMs: number): void {
    this.dispatchTimer = setTimeout(() => {
      this.recovery.poll(() => this.running);
      this.dispatching = this.fanOutPending()
        .then(() => this.fanOutOutage.succeeded())
        .catch((error: unknown) => {
          if (isDatabaseUnavailable(error)) this.fanOutOutage.failed(error);
          else this.log.error({ err: error }, 'webhook fan-out failed');
        })
        .finally(() => {
          this.dispatching = undefined;
          if (this.running) this.scheduleDispatch(this.config.dispatchMs);
        });
    }, delayMs);
  }
}
