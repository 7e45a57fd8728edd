import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../logger.ts';
import { sqlRows } from '../db/sql.ts';

/** Rows deleted per statement, so that a large backlog never holds locks or WAL for long. */
const DELETE_CHUNK = 1_000;

/** Time between two sweeps of the refusal ledger. */
const SWEEP_INTERVAL_MS = 3_600_000;

/**
 * Deletes refused deliveries not seen for `REFUSED_DELIVERY_RETENTION_DAYS` (and the hourly notice
 * marks older than that). Unlike conversation retention it is always on: the ledger keeps bodies
 * nobody asked to keep. Several instances may sweep at once; each deletion is idempotent.
 */
export class RefusedDeliveryRetention {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private stopped = false;

  constructor(
    private readonly em: EntityManager,
    private readonly days: number,
    private readonly log: Logger,
  ) {}

  /** Sweeps soon after start, then every hour, until `stop()`. */
  start(): void {
    const schedule = (delay: number) => {
      this.timer = setTimeout(() => {
        this.running = this.sweep()
          .catch((error: unknown) => this.log.error({ err: error }, 'refused delivery retention sweep failed'))
          .finally(() => {
            this.running = undefined;
            if (!this.stopped) schedule(SWEEP_INTERVAL_MS);
          });
      }, delay);
    };
    schedule(10_000);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** Deletes what expired; returns how many refused deliveries went. */
  async sweep(): Promise<number> {
    let deleted = 0;
    for (;;) {
      const rows = await sqlRows<{ id: string }>(
        this.em,
        `delete from refused_deliveries where id in (
           select id from refused_deliveries where last_seen_at < now() - make_interval(days => $1) limit $2
         ) returning id`,
        [this.days, DELETE_CHUNK],
      );
      deleted += rows.length;
      if (rows.length < DELETE_CHUNK || this.stopped) break;
    }
    await sqlRows(this.em, 'delete from delivery_refusal_notices where sent_at < now() - make_interval(days => $1)', [this.days]);
    if (deleted > 0) this.log.info({ deleted, days: this.days }, 'refused delivery retention deleted expired refusals');
    return deleted;
  }
}
