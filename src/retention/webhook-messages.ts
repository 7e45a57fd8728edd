import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../logger.ts';
import { ChunkedSweep } from './chunked-sweep.ts';
import { deleteExpiredWebhookMessages, type MessageLogCursor } from './queries.ts';

/** Messages looked at per statement: each takes its deliveries and attempts with it (about 20 rows with 10 endpoints). */
const MESSAGES_PER_STATEMENT = 100;

/**
 * Deletes outbound messages stored more than `OUTBOUND_WEBHOOK_MESSAGE_RETENTION_DAYS` ago, with their
 * deliveries and attempts, every hour, so that the message log does not grow for ever. A message still
 * owed an attempt, or attempted within the period, stays (`deleteExpiredWebhookMessages`). Each sweep walks
 * the expired messages once, oldest first, so the ones that stay cost one look per sweep.
 */
export class WebhookMessageRetention extends ChunkedSweep {
  private cursor: MessageLogCursor | undefined;

  constructor(
    private readonly em: EntityManager,
    private readonly days: number,
    log: Logger,
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
      const step = await deleteExpiredWebhookMessages(this.em, this.days, asked, this.cursor);
      deleted += step.deleted;
      this.cursor = step.cursor;
      if (step.examined < asked) break; // no expired message left after the cursor
    }
    return deleted;
  }

  protected logDeleted(deleted: number): void {
    this.log.info({ deleted, days: this.days }, 'webhook message retention deleted expired messages');
  }
}
