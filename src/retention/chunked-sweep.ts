import type { Logger } from '../logger.ts';

/** Rows deleted per statement, so that a large backlog never holds locks or WAL for long. */
const DELETE_CHUNK = 1_000;

/**
 * A sweep of expired rows, always on: soon after start, then every `everyMs`, in chunks of
 * `DELETE_CHUNK`, until `stop()`. Several instances may sweep at once; each deletion is idempotent.
 */
export abstract class ChunkedSweep {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  /** Set by `stop()`: a chunk that loops itself ends early on it too. */
  protected stopped = false;

  constructor(
    protected readonly log: Logger,
    private readonly timing: { firstMs: number; everyMs: number; failure: string },
  ) {}

  start(): void {
    const schedule = (delay: number) => {
      this.timer = setTimeout(() => {
        this.running = this.sweep()
          .catch((error: unknown) => this.log.error({ err: error }, this.timing.failure))
          .finally(() => {
            this.running = undefined;
            if (!this.stopped) schedule(this.timing.everyMs);
          });
      }, delay);
    };
    schedule(this.timing.firstMs);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** Deletes what expired; returns how many rows `deleteChunk` deleted. */
  async sweep(): Promise<number> {
    let deleted = 0;
    for (;;) {
      const chunk = await this.deleteChunk(DELETE_CHUNK);
      deleted += chunk;
      if (chunk < DELETE_CHUNK || this.stopped) break;
    }
    await this.afterChunks();
    if (deleted > 0) this.logDeleted(deleted);
    return deleted;
  }

  /** Deletes at most `limit` expired rows; returns how many went. */
  protected abstract deleteChunk(limit: number): Promise<number>;

  /** Anything else the sweep removes, once the chunks are done. */
  protected async afterChunks(): Promise<void> {}

  protected abstract logDeleted(deleted: number): void;
}
