/**
 * Delivery yields to ingestion, as autovacuum's cost delay yields to queries: while this instance
 * accepts at least `busyBatchesPerSecond` webhook batches a second, outbound work (fan-out, attempts)
 * runs one unit at a time and rests `REST_FACTOR` times as long as the unit took, so that it takes
 * about a twentieth of the time; below that rate it runs at full concurrency. The webhook's answer
 * never waits on delivery either way: this only keeps delivery from taking the CPU and the database
 * away from it on a busy instance. What waits shows in `outbound_webhook_messages_pending`.
 */
export class IngestPressure {
  private windowStart = performance.now();
  private inWindow = 0;
  private lastRate = 0;

  constructor(private readonly busyBatchesPerSecond: number) {}

  /** One webhook batch accepted. */
  note(): void {
    this.inWindow++;
  }

  /** Batches a second over the last window of a second or more (the window closes when asked after a second). */
  rate(): number {
    const now = performance.now();
    const elapsed = now - this.windowStart;
    if (elapsed >= 1_000) {
      this.lastRate = this.inWindow / (elapsed / 1_000);
      this.inWindow = 0;
      this.windowStart = now;
    }
    return this.lastRate;
  }

  busy(): boolean {
    return this.busyBatchesPerSecond > 0 && this.rate() >= this.busyBatchesPerSecond;
  }
}

/** How much longer than a unit of outbound work the worker rests after it while ingestion is busy. */
export const REST_FACTOR = 19;
/** The longest rest after one unit. */
export const MAX_REST_MS = 2_000;

/**
 * Runs units of outbound work: all at once while ingestion is quiet; while it is busy, one at a time,
 * each followed by a rest `REST_FACTOR` times its duration. A unit takes its turn before it fetches its jobs.
 */
export class OutboundGate {
  private tail: Promise<void> = Promise.resolve();

  constructor(private readonly pressure: IngestPressure | undefined) {}

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (!this.pressure?.busy()) return work();
    const previous = this.tail;
    let release!: () => void;
    this.tail = new Promise<void>((resolve) => (release = resolve));
    await previous;
    const started = performance.now();
    try {
      return await work();
    } finally {
      const rest = this.pressure.busy() ? Math.min(MAX_REST_MS, (performance.now() - started) * REST_FACTOR) : 0;
      setTimeout(release, rest);
    }
  }
}
