import pg from 'pg';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { RetentionConfig } from '../config.ts';
import type { Logger } from '../logger.ts';
import { writeConversationArchive } from './archive.ts';
import * as queries from './queries.ts';

/** Arbitrary constant: the advisory lock held by the one instance sweeping at a time. */
export const RETENTION_LOCK_ID = 7_240_115;

/** `application_name` of the connection holding the lock (visible in `pg_stat_activity`). */
export const RETENTION_APPLICATION_NAME = 'retention-sweeper';

/** Conversations read per query while looking for expired ones. */
const CANDIDATES_PER_QUERY = 100;

export interface SweepResult {
  /** True when another instance held the lock: this one did nothing. */
  readonly skipped: boolean;
  readonly conversations: number;
  readonly events: number;
  readonly archived: number;
}

/**
 * Deletes conversations not updated for `RETENTION_DAYS`, each after its archive when
 * `RETENTION_ARCHIVE_DIR` is set. One instance at a time: a session advisory lock, taken on a direct
 * connection (`DATABASE_LISTEN_URL`: through a transaction pooler a session lock would be held by a
 * server connection other clients share). Events go in transactions of `RETENTION_BATCH_EVENTS`,
 * each re-checking under the conversation's row lock that it is still expired, so a delivery that
 * revives it stops the deletion and ingestion never waits for more than one batch.
 */
export class RetentionService {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private stopped = false;

  constructor(
    private readonly em: EntityManager,
    private readonly lockUrl: string,
    private readonly config: RetentionConfig,
    private readonly log: Logger,
  ) {}

  /** Sweeps every `intervalMs` (the first soon after start) until `stop()`. */
  start(): void {
    const schedule = (delay: number) => {
      this.timer = setTimeout(() => {
        this.running = this.sweep()
          .catch((error: unknown) => this.log.error({ err: error }, 'retention sweep failed'))
          .finally(() => {
            this.running = undefined;
            if (!this.stopped) schedule(this.config.intervalMs);
          });
      }, delay);
    };
    schedule(Math.min(this.config.intervalMs, 10_000));
  }

  /** Stops scheduling and lets a running sweep end after its current batch. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** One sweep over every expired conversation, unless another instance is sweeping. */
  async sweep(): Promise<SweepResult> {
    const lock = new pg.Client({ connectionString: this.lockUrl, application_name: RETENTION_APPLICATION_NAME });
    lock.on('error', () => {}); // a lost connection ends the lock; the sweep's own queries report
    await lock.connect();
    try {
      if (!(await queries.tryLockSweep(lock, RETENTION_LOCK_ID))) return { skipped: true, conversations: 0, events: 0, archived: 0 };
      try {
        return await this.sweepLocked();
      } finally {
        await queries.unlockSweep(lock, RETENTION_LOCK_ID).catch(() => {});
      }
    } finally {
      await lock.end().catch(() => {});
    }
  }

  private async sweepLocked(): Promise<SweepResult> {
    let conversations = 0;
    let events = 0;
    let archived = 0;
    // Walks the expired conversations once, oldest first, by (updated_at, id): one that fails stays for the next sweep.
    let after: { updatedAt: string; id: string } | undefined;
    while (!this.stopped) {
      const candidates = await queries.expiredConversations(this.em, this.config.days, CANDIDATES_PER_QUERY, after);
      if (candidates.length === 0) break;
      for (const candidate of candidates) {
        if (this.stopped) break;
        try {
          const outcome = await this.retire(candidate.id);
          if (outcome) {
            conversations++;
            events += outcome.events;
            if (outcome.archive) archived++;
          }
        } catch (error) {
          this.log.error({ err: error, conversationId: candidate.id }, 'retention: could not delete a conversation; it stays for the next sweep');
        }
      }
      const last = candidates[candidates.length - 1]!;
      after = { updatedAt: last.updated_at, id: last.id };
    }
    if (conversations > 0) this.log.info({ conversations, events, archived }, 'retention sweep deleted expired conversations');
    return { skipped: false, conversations, events, archived };
  }

  /** Archives (if configured) then deletes one conversation; undefined when it was revived or is gone. */
  private async retire(conversationId: string): Promise<{ events: number; archive: string | undefined } | undefined> {
    const { days, batchEvents, batchPauseMs, archiveDir } = this.config;
    const archive = archiveDir ? await writeConversationArchive(this.em, conversationId, archiveDir) : undefined;
    if (archiveDir && !archive) return undefined;
    const knex = this.em.getConnection().getKnex();
    let events = 0;
    for (;;) {
      if (this.stopped) return undefined;
      const deleted = await knex.transaction(async (trx) => {
        if (!(await queries.lockIfExpired(trx, conversationId, days))) return -1;
        return queries.deleteEventBatch(trx, conversationId, batchEvents);
      });
      if (deleted === -1) {
        this.log.info({ conversationId, deletedEvents: events }, 'retention: the conversation was updated meanwhile; it stays');
        return undefined;
      }
      events += deleted;
      if (deleted < batchEvents) break;
      if (batchPauseMs > 0) await new Promise((resolve) => setTimeout(resolve, batchPauseMs));
    }
    if (!(await queries.deleteIfExpired(this.em, conversationId, days))) return undefined;
    this.log.info({ conversationId, events, archive }, 'retention: conversation deleted');
    return { events, archive };
  }
}
