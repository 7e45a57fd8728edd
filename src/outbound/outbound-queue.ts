import { fromKnex, PgBoss, systemClock, type Clock } from 'pg-boss';
import type { Knex } from '@mikro-orm/postgresql';
import type { Logger } from '../logger.ts';
import { DELIVERY_QUEUE, QUEUE_SCHEMA } from './queue-schema.ts';

/**
 * What a delivery job asks for: attempt `attempt` of a message, to one endpoint (`endpoint_id`: a
 * retry, a test or a manual retry) or to every endpoint it was fanned out to (a first attempt).
 */
export interface DeliveryJob {
  message_id: string;
  endpoint_id?: string;
  attempt: number;
}

/** A delivery job to queue; `startAfter` absent: at once. */
export interface QueuedDelivery extends DeliveryJob {
  startAfter?: Date;
}

/** How the outbound code queues work, and its only way in (as Svix's `TaskQueueProducer`). */
export interface OutboundQueue {
  /** Queues the jobs inside the caller's transaction: they exist if, and only if, it commits. */
  enqueueDeliveries(trx: Knex.Transaction, deliveries: readonly QueuedDelivery[]): Promise<void>;
}

/** pg-boss's system clock, with timers that do not keep a stopping process alive. */
const backgroundClock: Clock = {
  ...systemClock,
  setTimeout: (fn, ms) => setTimeout(fn, ms).unref(),
  setInterval: (fn, ms) => setInterval(fn, ms).unref(),
};

/**
 * The delivery queue through pg-boss's public API: `insert` with the caller's transaction as its
 * `db`. Its PgBoss instance only produces (no supervision, schedules or schema changes, which the
 * worker's instance does), runs on the app's pool, and starts at the first enqueue.
 */
export class PgBossOutboundQueue implements OutboundQueue {
  private boss: Promise<PgBoss> | undefined;

  constructor(
    private readonly knex: Knex,
    private readonly log: Logger,
  ) {}

  async enqueueDeliveries(trx: Knex.Transaction, deliveries: readonly QueuedDelivery[]): Promise<void> {
    if (deliveries.length === 0) return;
    const jobs = deliveries.map(({ startAfter, ...data }) => ({ data, startAfter }));
    await (await this.started()).insert(DELIVERY_QUEUE, jobs, { db: fromKnex(trx) });
  }

  private started(): Promise<PgBoss> {
    this.boss ??= this.start().catch((error: unknown) => {
      this.boss = undefined;
      throw error;
    });
    return this.boss;
  }

  private async start(): Promise<PgBoss> {
    const boss = new PgBoss({
      db: fromKnex(this.knex),
      schema: QUEUE_SCHEMA,
      supervise: false,
      schedule: false,
      migrate: false,
      registerInstance: false,
      clock: backgroundClock,
    });
    boss.on('error', (error) => this.log.error({ err: error }, 'webhook queue error'));
    return boss.start();
  }
}
