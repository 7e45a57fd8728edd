import { setTimeout as sleep } from 'node:timers/promises';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../logger.ts';
import { busyRestMs, inFlight, type Pressure } from '../outbound/ingest-pressure.ts';
import { ChunkedSweep } from './chunked-sweep.ts';
import { deleteExpiredWebhookMessages, type MessageLogCursor } from './queries.ts';

/** Messages looked at per statement: each takes its deliveries and attempts with it (about 20 rows with 10 endpoints). */
const MESSAGES_PER_STATEMENT = 100;

/**
 * Deletes outbound messages stored more than `OUTBOUND_WEBHOOK_MESSAGE_RETENTION_DAYS` ago, with their
 * deliveries and attempts, every hour, so that the message log does not grow for ever. A message still
 * owed an attempt, or attempted within the period, stays (`deleteExpiredWebhookMessages`). Each sweep walks
 * the expired messages once, oldest first, so the ones that stay cost one look per sweep. Like delivery and
 * indexing it yields to the webhook: while that is busy, each statement is followed by a rest 19 times as
 * long, so a first sweep of a large log never takes the database from ingestion.
 */
export class WebhookMessageRetention extends ChunkedSweep {
  private cursor: MessageLogCursor | undefined;

  constructor(
    private readonly em: EntityManager,
    private readonly days: number,
    log: Logger,
    private readonly pressure?: Pressure,
  ) {
    super(log, { firstMs: 20_000, everyMs: 3_600_000, failure: 'webhook message retention sweep failed' });
  }

  override async sweep(): Promise<number> {
    this.cursor = undefined;
    return super.sweep();
  }

  /** Deletes up to `limit` expired messages, looking further while the messages looked at stay. */
  protected async deleteChunk(limit: number): Promise<number> {
    let deleted = 0;
    while (deleted < limit) {
      const asked = Math.min(MESSAGES_PER_STATEMENT, limit - deleted);
      let started = 0; // once it may run: the wait in `enter()` is not the statement's time
      const step = await inFlight(this.pressure, () => {
        started = performance.now();
        return deleteExpiredWebhookMessages(this.em, this.days, asked, this.cursor);
      });
      deleted += step.deleted;
      this.cursor = step.cursor;
      if (step.examined < asked || this.stopped) break; // no expired message left after the cursor, or stopping
      const rest = busyRestMs(this.pressure, performance.now() - started);
      if (rest > 0) await sleep(rest);
    }
    return deleted;
  }

  protected logDeleted(deleted: number): void {
    this.log.info({ deleted, days: this.days }, 'webhook message retention deleted expired messages');
  }
}
