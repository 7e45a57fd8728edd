import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../logger.ts';
import { deleteExpiredIdempotencyRecords } from './queries.ts';

/** Rows deleted per statement, so that a large backlog never holds locks or WAL for long. */
const DELETE_CHUNK = 1_000;

/** Time between two sweeps: a record lives 24 h, and an expired one is already ignored (and reclaimed) by the requests. */
const SWEEP_INTERVAL_MS = 3_600_000;

/**
 * Deletes idempotency records past their 24 h (`src/api/idempotency.ts`). Always on, like the refusal
 * ledger's sweep; several instances may sweep at once, each deletion is idempotent.
 */
export class IdempotencyRecordRetention {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private stopped = false;

  constructor(
    private readonly em: EntityManager,
    private readonly log: Logger,
  ) {}

  /** Sweeps soon after start, then every hour, until `stop()`. */
  start(): void {
    const schedule = (delay: number) => {
      this.timer = setTimeout(() => {
        this.running = this.sweep()
          .catch((error: unknown) => this.log.error({ err: error }, 'idempotency record sweep failed'))
          .finally(() => {
            this.running = undefined;
            if (!this.stopped) schedule(SWEEP_INTERVAL_MS);
          });
      }, delay);
    };
    schedule(15_000);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** Deletes what expired; returns how many records went. */
  async sweep(): Promise<number> {
    let deleted = 0;
    for (;;) {
      const chunk = await deleteExpiredIdempotencyRecords(this.em, DELETE_CHUNK);
      deleted += chunk;
      if (chunk < DELETE_CHUNK || this.stopped) break;
    }
    if (deleted > 0) this.log.info({ deleted }, 'expired idempotency records deleted');
    return deleted;
  }
}
