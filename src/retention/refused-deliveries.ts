import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../logger.ts';
import { deleteExpiredRefusalNotices, deleteExpiredRefusals } from './queries.ts';

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
      const chunk = await deleteExpiredRefusals(this.em, this.days, DELETE_CHUNK);
      deleted += chunk;
      if (chunk < DELETE_CHUNK || this.stopped) break;
    }
    await deleteExpiredRefusalNotices(this.em, this.days);
    if (deleted > 0) this.log.info({ deleted, days: this.days }, 'refused delivery retention deleted expired refusals');
    return deleted;
  }
}
