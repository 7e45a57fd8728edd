import type { Logger } from '../logger.ts';

/** What an outage log reports to the metrics: one failure, and one outage begun. */
export interface OutageObserver {
  failure(component: string): void;
  outage(component: string): void;
}

/**
 * One line when the database becomes unreachable for a component, one when it is back, with how many
 * operations failed meanwhile: an outage logs like an outage, not like a flood of one error line per
 * refused request or failed poll. The metrics still count every failure.
 */
export class OutageLog {
  private downSince: number | undefined;
  private failuresWhileDown = 0;
  private probing: NodeJS.Timeout | undefined;

  /**
   * `failures` names what fails ("requests refused"); `probe`, when given, tells when the database is
   * back for a component that has no work of its own to find out (the request path waits for requests).
   */
  constructor(
    private readonly component: string,
    private readonly failures: string,
    private readonly log: Logger,
    private readonly observer?: OutageObserver,
    private readonly probe?: { reachable: () => Promise<boolean>; everyMs: number },
  ) {}

  /** True while the database is unreachable for this component. */
  get down(): boolean {
    return this.downSince !== undefined;
  }

  /** An operation failed because the database is unreachable: the first of an outage is logged. */
  failed(error: unknown): void {
    this.observer?.failure(this.component);
    this.failuresWhileDown++;
    if (this.downSince !== undefined) return;
    this.downSince = Date.now();
    this.observer?.outage(this.component);
    this.log.error({ component: this.component, err: error }, `${this.component}: the database is unreachable`);
    if (this.probe) this.probeUntilBack(this.probe);
  }

  /** An operation succeeded: if the database was unreachable, its return is logged. */
  succeeded(): void {
    if (this.downSince === undefined) return;
    const seconds = Math.round((Date.now() - this.downSince) / 100) / 10;
    const failed = this.failuresWhileDown;
    this.downSince = undefined;
    this.failuresWhileDown = 0;
    clearTimeout(this.probing);
    this.probing = undefined;
    this.log.warn(
      { component: this.component, outageSeconds: seconds, failed },
      `${this.component}: the database is reachable again after ${seconds} s; ${failed} ${this.failures} meanwhile`,
    );
  }

  /** Stops probing (shutdown). */
  close(): void {
    clearTimeout(this.probing);
    this.probing = undefined;
  }

  private probeUntilBack(probe: { reachable: () => Promise<boolean>; everyMs: number }): void {
    this.probing = setTimeout(async () => {
      const reachable = await probe.reachable().catch(() => false);
      if (this.downSince === undefined) return;
      if (reachable) this.succeeded();
      else this.probeUntilBack(probe);
    }, probe.everyMs);
    this.probing.unref();
  }
}
