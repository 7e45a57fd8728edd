import { performance } from 'node:perf_hooks';

/** What work behind the webhook yields to: this instance's webhook (IngestPressure), or every instance's (SharedIngestPressure). */
export interface Pressure {
  busy(): boolean;
  restFactor(): number;
}

/**
 * How hard this instance's webhook is pressed, for the work that runs behind it (outbound delivery,
 * search indexing): the batches it accepts a second, and how many wait at once on average (the time
 * they spent in the ingest over the window, Little's law). The webhook's answer never waits on that work;
 * this only keeps it from taking the CPU and the database away from a webhook that has none to spare.
 */
export class IngestPressure implements Pressure {
  private windowStart = performance.now();
  private inWindow = 0;
  private waitingMsInWindow = 0;
  private lastRate = 0;
  private lastWaiting = 0;
  private loopAtWindowStart = performance.eventLoopUtilization();
  private lastLoopBusy = 0;

  /** `busyBatchesPerSecond`: the rate from which the webhook counts as busy (0: never). */
  constructor(private readonly busyBatchesPerSecond: number) {}

  /** One webhook batch accepted, after `waitedMs` in the ingest (storing it and its group's commit). */
  note(waitedMs = 0): void {
    this.inWindow++;
    this.waitingMsInWindow += waitedMs;
  }

  /** Batches a second over the last window of a second or more (the window closes when asked after a second). */
  rate(): number {
    this.roll();
    return this.lastRate;
  }

  /** Batches in the ingest at once, on average over the same window. */
  waiting(): number {
    this.roll();
    return this.lastWaiting;
  }

  /** The share of the same window this process's event loop was busy (0 to 1). */
  loopBusy(): number {
    this.roll();
    return this.lastLoopBusy;
  }

  busy(): boolean {
    return this.busyBatchesPerSecond > 0 && this.rate() >= this.busyBatchesPerSecond;
  }

  /**
   * How much longer than a unit of work behind a busy webhook should rest after it: none while the
   * webhook has room, `REST_FACTOR` (a twentieth of the time) once it is saturated, in proportion between
   * (so one slow second does not stop delivery for long). Saturated is either bound: batches queue up in
   * the database (many waiting at once), or the event loop has no time left (small batches).
   */
  restFactor(): number {
    if (!this.busy()) return 0;
    const queued = (this.waiting() - WAITING_FREE) / (WAITING_SATURATED - WAITING_FREE);
    const looped = (this.loopBusy() - LOOP_FREE) / (LOOP_SATURATED - LOOP_FREE);
    return REST_FACTOR * Math.min(1, Math.max(0, queued, looped));
  }

  private roll(): void {
    const now = performance.now();
    const elapsed = now - this.windowStart;
    if (elapsed < 1_000) return;
    this.lastRate = this.inWindow / (elapsed / 1_000);
    this.lastWaiting = this.waitingMsInWindow / elapsed;
    this.lastLoopBusy = performance.eventLoopUtilization(this.loopAtWindowStart).utilization;
    this.loopAtWindowStart = performance.eventLoopUtilization();
    this.inWindow = 0;
    this.waitingMsInWindow = 0;
    this.windowStart = now;
  }
}

/** Batches waiting at once, on average, up to which work behind a busy webhook does not rest (half its peak rate keeps about 3). */
export const WAITING_FREE = 4;
/** From which it rests the longest: a closed loop of 16 clients keeps 11 to 13 waiting. */
export const WAITING_SATURATED = 12;
/** The event loop's busy share up to which work behind a busy webhook does not rest, and from which it rests the longest. */
export const LOOP_FREE = 0.6;
export const LOOP_SATURATED = 0.9;
/** How much longer than a unit of outbound work the worker rests after it while ingestion is saturated. */
export const REST_FACTOR = 19;
/** The longest rest after one unit. */
export const MAX_REST_MS = 2_000;

/**
 * Runs units of outbound work: all at once while the webhook is quiet or has room (a rest factor of 0);
 * while it is pressed, one at a time, each followed by a rest of `restFactor()` times as long as it took
 * (up to a twentieth of the time once the webhook is saturated, as autovacuum's cost delay yields to
 * queries). A unit takes its turn before it fetches its jobs.
 */
export class OutboundGate {
  private tail: Promise<void> = Promise.resolve();

  constructor(private readonly pressure: Pressure | undefined) {}

  async run<T>(work: () => Promise<T>): Promise<T> {
    // A rest factor of 0: the webhook has room, and units one at a time would only delay delivery.
    if (!this.pressure?.busy() || this.pressure.restFactor() === 0) return work();
    const previous = this.tail;
    let release!: () => void;
    this.tail = new Promise<void>((resolve) => (release = resolve));
    await previous;
    const started = performance.now();
    try {
      return await work();
    } finally {
      const rest = Math.min(MAX_REST_MS, (performance.now() - started) * this.pressure.restFactor());
      setTimeout(release, rest);
    }
  }
}
