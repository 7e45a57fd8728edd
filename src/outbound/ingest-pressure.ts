import { performance, type EventLoopUtilization } from 'node:perf_hooks';

/** What work behind the webhook yields to: this instance's webhook (IngestPressure), or every instance's (SharedIngestPressure). */
export interface Pressure {
  busy(): boolean;
  restFactor(): number;
  /** A unit of that work starts: it waits while the webhook's own figures are being read, then counts as in flight until `leave()`. */
  enter(): Promise<void>;
  leave(): void;
}

/**
 * How hard this instance's webhook is pressed, for the work that runs behind it (outbound delivery, its
 * fan-out, search indexing): the batches it accepts a second, how many are in the ingest at once, and the
 * share of the event loop it keeps busy. The last two are read without that work: over the moments no unit
 * of it is in flight, or, when its units leave no such moment, over a short probe that holds new units
 * (else the work would rest from its own load); the median of the last few seconds' readings counts. The
 * webhook's answer never waits on that work; this only keeps it from taking the CPU and the database away
 * from a webhook that has none to spare.
 */
export class IngestPressure implements Pressure {
  private windowStart = performance.now();
  private acceptedInWindow = 0;
  private lastRate = 0;
  /** The last `READINGS` readings of the webhook's own figures, newest last: their median is what counts. */
  private readings: { waiting: number; loopBusy: number }[] = [];
  /** Batches in the ingest now, and that count integrated over time (batch·ms) since the start. */
  private inIngest = 0;
  private batchMs = 0;
  private lastTick = performance.now();
  /** When a batch last went into the ingest or left it. */
  private lastBatchAt = -Infinity;
  /** Background units in flight and, while there are none, the loop's figures when the quiet began. */
  private unitsInFlight = 0;
  private quietFrom: EventLoopUtilization | undefined = performance.eventLoopUtilization();
  /** The window's quiet moments: their length, the batches' integral over them, and the loop's active ms. */
  private quiet = { ms: 0, batchMs: 0, loopActive: 0 };
  /** A hold of new units while the webhook's own figures are read; `unitsDone` when those in flight are. */
  private probe: { held: Promise<void>; unitsDone: () => void } | undefined;

  /** `busyBatchesPerSecond`: the rate from which the webhook counts as busy (0: never). */
  constructor(private readonly busyBatchesPerSecond: number) {}

  /** A webhook batch goes into the ingest (storing it and its group's commit). */
  entered(): void {
    this.tick();
    this.lastBatchAt = this.lastTick;
    this.inIngest++;
  }

  /** It left the ingest: accepted, or refused. */
  left(accepted = true): void {
    this.tick();
    this.lastBatchAt = this.lastTick;
    this.inIngest--;
    if (accepted) this.acceptedInWindow++;
  }

  /** Batches accepted a second over the last window of a second or more (the window closes when asked after a second). */
  rate(): number {
    this.roll();
    return this.lastRate;
  }

  /** Batches in the ingest at once, on average over the window's moments without background work (the median of the last readings). */
  waiting(): number {
    this.roll();
    return median(this.readings.map((reading) => reading.waiting));
  }

  /** The share of this process's event loop busy over the same moments (0 to 1; the median of the last readings). */
  loopBusy(): number {
    this.roll();
    return median(this.readings.map((reading) => reading.loopBusy));
  }

  /** Busy over the last second, unless it has paused since: nothing in the ingest and no batch for `IDLE_MS`. */
  busy(): boolean {
    return this.busyAt(this.rate()) && !(this.inIngest === 0 && performance.now() - this.lastBatchAt >= IDLE_MS);
  }

  private busyAt(rate: number): boolean {
    return this.busyBatchesPerSecond > 0 && rate >= this.busyBatchesPerSecond;
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

  async enter(): Promise<void> {
    while (this.probe) await this.probe.held;
    this.tick();
    if (this.unitsInFlight++ === 0) this.endQuiet();
  }

  leave(): void {
    this.tick();
    if (--this.unitsInFlight > 0) return;
    this.quietFrom = performance.eventLoopUtilization();
    this.probe?.unitsDone();
  }

  /** Adds the time since the last change to the batches' integrals (and to the quiet ones while no unit is in flight). */
  private tick(): void {
    const now = performance.now();
    const ms = now - this.lastTick;
    this.lastTick = now;
    this.batchMs += this.inIngest * ms;
    if (this.unitsInFlight > 0) return;
    this.quiet.ms += ms;
    this.quiet.batchMs += this.inIngest * ms;
  }

  /** Adds the loop's active time since the quiet began to the window's quiet moments. */
  private endQuiet(): void {
    if (!this.quietFrom) return;
    this.quiet.loopActive += performance.eventLoopUtilization(this.quietFrom).active;
    this.quietFrom = undefined;
  }

  /**
   * Holds new units until those in flight are done (or `PROBE_SETTLE_MS` passed), reads the webhook's
   * figures over the next `PROBE_MS`, then lets the units go.
   */
  private startProbe(): void {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const read = () => {
      clearTimeout(settling);
      this.probe = { held, unitsDone: () => undefined };
      this.tick();
      const from = { loop: performance.eventLoopUtilization(), batchMs: this.batchMs, at: this.lastTick };
      setTimeout(() => {
        this.tick();
        this.record((this.batchMs - from.batchMs) / Math.max(1, this.lastTick - from.at), performance.eventLoopUtilization(from.loop).utilization);
        this.probe = undefined;
        release();
      }, PROBE_MS).unref();
    };
    const settling = setTimeout(read, PROBE_SETTLE_MS).unref();
    this.probe = { held, unitsDone: read };
    if (this.unitsInFlight === 0) read();
  }

  /** Keeps a reading of the webhook's own figures, and the `READINGS - 1` before it. */
  private record(waiting: number, loopBusy: number): void {
    this.readings = [...this.readings.slice(1 - READINGS), { waiting, loopBusy }];
  }

  private roll(): void {
    const now = performance.now();
    const elapsed = now - this.windowStart;
    if (elapsed < 1_000) return;
    this.tick();
    if (this.quietFrom) {
      this.endQuiet();
      this.quietFrom = performance.eventLoopUtilization();
    }
    this.lastRate = this.acceptedInWindow / (elapsed / 1_000);
    const { ms, batchMs, loopActive } = this.quiet;
    // Readings from before a second the webhook was not busy are of another load.
    if (!this.busyAt(this.lastRate)) this.readings = [];
    // Quiet enough to read the webhook's own figures; else, while it is busy, a probe reads them.
    if (ms >= PROBE_MS) {
      this.record(batchMs / ms, Math.min(1, loopActive / ms));
    } else if (!this.probe && this.busyAt(this.lastRate)) {
      this.startProbe();
    }
    this.quiet = { ms: 0, batchMs: 0, loopActive: 0 };
    this.acceptedInWindow = 0;
    this.windowStart = now;
  }
}

/** The middle value (the mean of the two middle ones for an even count; 0 for none). */
function median(values: number[]): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** The readings (one a second) whose median counts: one second's burst (a checkpoint, a collection) does not make the work rest. */
export const READINGS = 3;
/** Batches waiting at once, on average, up to which work behind a busy webhook does not rest (half its peak rate keeps about 3). */
export const WAITING_FREE = 4;
/** From which it rests the longest: a closed loop of 16 clients keeps 11 to 13 waiting. */
export const WAITING_SATURATED = 12;
/** The event loop's busy share up to which work behind a busy webhook does not rest (half its peak rate keeps 0.45–0.65). */
export const LOOP_FREE = 0.7;
/** From which it rests the longest. */
export const LOOP_SATURATED = 0.9;
/** How long a probe reads the webhook's figures for, and the quiet a window needs to do without one. */
export const PROBE_MS = 100;
/** How long a probe waits for the units in flight to finish before it reads the figures anyway. */
export const PROBE_SETTLE_MS = 100;
/** How much longer than a unit of outbound work the worker rests after it while ingestion is saturated. */
export const REST_FACTOR = 19;
/** Units run at once while the webhook is busy but has room: enough to keep up, too few to take its event loop. */
export const BUSY_UNITS = 2;
/** The longest rest after one unit. */
export const MAX_REST_MS = 2_000;
/**
 * How long a webhook with nothing in the ingest has to go without a batch to count as paused: work behind it then
 * goes on at once instead of after the second's reading (a closed loop that stopped left 1 to 2 s of rest).
 */
export const IDLE_MS = 250;
/** How often a rest asks again how pressed the webhook is. */
export const REST_SLICE_MS = 250;

/** Runs `work` as a unit of background work in flight, so the webhook's own figures are read without it (`Pressure.enter`). */
export async function inFlight<T>(pressure: Pressure | undefined, work: () => Promise<T>): Promise<T> {
  await pressure?.enter();
  try {
    return await work();
  } finally {
    pressure?.leave();
  }
}

/** The rest after a unit that took `tookMs`, for work that yields as indexing does: `REST_FACTOR` times as long while the webhook is busy (at most `MAX_REST_MS`), else none. */
export function busyRestMs(pressure: Pressure | undefined, tookMs: number): number {
  return pressure?.busy() ? Math.min(MAX_REST_MS, tookMs * REST_FACTOR) : 0;
}

/**
 * Runs units of outbound work: all at once while the webhook is quiet; while it is busy, `BUSY_UNITS` at
 * a time when it has room (a rest factor of 0), else one at a time, each followed by a rest of
 * `restFactor()` times as long as it took (up to a twentieth of the time once the webhook is saturated, as
 * autovacuum's cost delay yields to queries; asked again as it goes, so it ends once the webhook has
 * room). A unit takes its turn before it fetches its jobs; a `first` unit (making messages, which every
 * delivery waits for) takes the next turn, ahead of those waiting, unless the last turn was one too.
 */
export class OutboundGate {
  /** Units holding a turn (running, or resting after it). */
  private turns = 0;
  private readonly waiting = { first: [] as (() => void)[], rest: [] as (() => void)[] };
  private lastWasFirst = false;

  constructor(private readonly pressure: Pressure | undefined) {}

  async run<T>(work: () => Promise<T>, first = false): Promise<T> {
    const pressure = this.pressure;
    if (!pressure) return work();
    if (!pressure.busy()) return inFlight(pressure, work);
    await this.turn(first);
    const started = performance.now();
    try {
      return await inFlight(pressure, work);
    } finally {
      void this.restAfter(pressure, performance.now() - started).then(() => this.pass());
    }
  }

  /** Rests `restFactor()` times `tookMs` (at most `MAX_REST_MS`), asking again every `REST_SLICE_MS`: a webhook that has room again ends it. */
  private async restAfter(pressure: Pressure, tookMs: number): Promise<void> {
    const from = performance.now();
    for (;;) {
      const left = Math.min(MAX_REST_MS, tookMs * pressure.restFactor()) - (performance.now() - from);
      if (left <= 0) return;
      await new Promise((resolve) => setTimeout(resolve, Math.min(REST_SLICE_MS, left)));
    }
  }

  /** How many units may hold a turn at once now. */
  private turnsAllowed(): number {
    return this.pressure!.restFactor() > 0 ? 1 : BUSY_UNITS;
  }

  private turn(first: boolean): Promise<void> {
    if (this.turns < this.turnsAllowed()) {
      this.turns++;
      return Promise.resolve();
    }
    return new Promise((go) => (first ? this.waiting.first : this.waiting.rest).push(go));
  }

  private pass(): void {
    this.turns--;
    while (this.turns < this.turnsAllowed()) {
      // Turns alternate while both wait: making messages never waits behind the fetches, nor starves them.
      const first = this.waiting.first.length > 0 && !(this.lastWasFirst && this.waiting.rest.length > 0);
      const next = first ? this.waiting.first.shift() : this.waiting.rest.shift();
      if (!next) return;
      this.lastWasFirst = first;
      this.turns++;
      next();
    }
  }

}
