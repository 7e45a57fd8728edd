/**
 * Group commit: batches arriving while transactions are in flight share the next transaction, one
 * statement and one commit, and each caller hears only after its own batch committed (guarantees and
 * figures: docs/performance.md, "How a webhook batch is stored").
 */

export interface GroupCommitOptions {
  /** Transactions in flight at once (beyond the first, only for full groups); more batches wait. */
  readonly maxInFlight: number;
  /** At most this many batches in one transaction. */
  readonly maxBatches: number;
  /** At most this many events in one transaction (a larger single batch still goes alone). */
  readonly maxEvents: number;
}

/** Stores several batches in one transaction and returns one outcome per batch, in their order. */
export type StoreBatches<B, O> = (batches: B[]) => Promise<O[]>;

interface Pending<B, O> {
  batch: B;
  events: number;
  resolve(outcome: O): void;
  reject(error: unknown): void;
}

/** Counters, for tests and diagnostics. */
export interface GroupCommitStats {
  /** Batches submitted. */
  batches: number;
  /** Store calls (transactions), retries of a failed group's batches included. */
  transactions: number;
  /** The largest group so far, in batches. */
  largestGroup: number;
  /** Groups whose statement failed as a whole, so that their batches were retried one by one. */
  retriedGroups: number;
}

export class GroupCommitter<B, O> {
  private readonly queue: Pending<B, O>[] = [];
  /** The events of the batches in `queue`. */
  private queuedEvents = 0;
  private inFlight = 0;
  private scheduled = false;
  readonly stats: GroupCommitStats = { batches: 0, transactions: 0, largestGroup: 0, retriedGroups: 0 };

  constructor(
    private readonly store: StoreBatches<B, O>,
    private readonly options: GroupCommitOptions,
    /** Whether an error of the group's store would fail each of its batches alone just the same. */
    private readonly failsEveryBatch: (error: unknown) => boolean = () => false,
  ) {}

  /** Stores `batch` (`events` long, for the group bound); settles once its transaction has. */
  submit(batch: B, events: number): Promise<O> {
    this.stats.batches++;
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ batch, events, resolve, reject });
      this.queuedEvents += events;
      this.schedule();
    });
  }

  /**
   * Starts groups once the current turn of the event loop is over, so that the requests the
   * server parsed in this turn go together, even when a transaction slot is free.
   */
  private schedule(): void {
    if (this.scheduled || !this.mayStart()) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.dispatch();
    });
  }

  /** With batches waiting: whether a group may start now (none in flight, or a full one and a free slot). */
  private mayStart(): boolean {
    if (this.inFlight === 0) return true;
    const full = this.queue.length >= this.options.maxBatches || this.queuedEvents >= this.options.maxEvents;
    return full && this.inFlight < this.options.maxInFlight;
  }

  private dispatch(): void {
    while (this.queue.length > 0 && this.mayStart()) {
      const group = this.take();
      this.inFlight++;
      void this.commit(group).finally(() => {
        this.inFlight--;
        this.dispatch();
      });
    }
  }

  /** The next group: the oldest batches, within the bounds; at least one. */
  private take(): Pending<B, O>[] {
    let count = 0;
    let events = 0;
    while (count < this.queue.length && count < this.options.maxBatches) {
      const next = this.queue[count]!.events;
      if (count > 0 && events + next > this.options.maxEvents) break;
      events += next;
      count++;
    }
    this.queuedEvents -= events;
    return this.queue.splice(0, count);
  }

  private async commit(group: Pending<B, O>[]): Promise<void> {
    this.stats.transactions++;
    this.stats.largestGroup = Math.max(this.stats.largestGroup, group.length);
    let outcomes: O[];
    try {
      outcomes = await this.store(group.map((pending) => pending.batch));
    } catch (error) {
      if (group.length === 1 || this.failsEveryBatch(error)) {
        for (const pending of group) pending.reject(error);
        return;
      }
      // Whatever failed, it must fail only the batch that caused it: each batch again, alone.
      this.stats.retriedGroups++;
      for (const pending of group) {
        this.stats.transactions++;
        try {
          const [outcome] = await this.store([pending.batch]);
          pending.resolve(outcome!);
        } catch (alone) {
          pending.reject(alone);
        }
      }
      return;
    }
    group.forEach((pending, i) => pending.resolve(outcomes[i]!));
  }
}
