import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../logger.ts';
import type { Pressure } from './ingest-pressure.ts';
import { othersIngestPressure, reportIngestPressure } from './queries.ts';

/** How often an instance reports its webhook's pressure and reads the others'. */
export const EXCHANGE_MS = 1_000;
/** A report older than this is no longer pressure (its instance is quiet, or gone). */
const FRESH_MS = 3 * EXCHANGE_MS;

/**
 * The webhook's pressure across instances (table `ingest_pressure`): an instance whose webhook is busy
 * reports its rest factor every second; an instance that works behind webhooks (delivery, indexing)
 * yields to the busiest one reported as to its own webhook (one unit at a time, resting the highest
 * factor). So a delivery instance of its own (the webhook's instances with `OUTBOUND_WEBHOOK_WORKER=false`)
 * still leaves them the CPU and the database they need. Built by services.ts, started by main.ts: an app
 * never started yields to its own webhook only.
 */
export class SharedIngestPressure implements Pressure {
  private readonly instanceId = randomUUID();
  /** The highest rest factor of the other instances' busy webhooks; null when none is busy. */
  private others: number | null = null;
  private reported = false;
  private timer: NodeJS.Timeout | undefined;
  private exchanging: Promise<void> | undefined;
  private failing = false;

  constructor(
    private readonly em: EntityManager,
    private readonly local: Pressure,
    private readonly log: Logger,
  ) {}

  /** `readsOthers`: whether this instance runs work that yields (else it only reports). */
  start(readsOthers: boolean): void {
    this.timer = setInterval(() => {
      this.exchanging ??= this.exchange(readsOthers).finally(() => (this.exchanging = undefined));
    }, EXCHANGE_MS);
    this.timer.unref();
  }

  /** Reports this instance's factor while its webhook is busy (and once when it no longer is), then reads the others'. */
  async exchange(readsOthers: boolean): Promise<void> {
    try {
      const factor = this.local.busy() ? this.local.restFactor() : null;
      if (factor !== null || this.reported) {
        await reportIngestPressure(this.em, this.instanceId, factor);
        this.reported = factor !== null;
      }
      if (readsOthers) this.others = await othersIngestPressure(this.em, this.instanceId, FRESH_MS);
      if (this.failing) this.log.info('ingest pressure exchange works again');
      this.failing = false;
    } catch (error) {
      // Unknown pressure elsewhere: yield to this instance's own until the exchange works again.
      this.others = null;
      if (!this.failing) this.log.warn({ err: error }, 'ingest pressure exchange failed; yielding to this instance\'s webhook only until it works again');
      this.failing = true;
    }
  }

  busy(): boolean {
    return this.local.busy() || this.others !== null;
  }

  restFactor(): number {
    return Math.max(this.local.busy() ? this.local.restFactor() : 0, this.others ?? 0);
  }

  /** Background units are this process's: they share its loop with its own webhook only. */
  enter(): Promise<void> {
    return this.local.enter();
  }

  leave(): void {
    this.local.leave();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.exchanging;
    if (this.reported) await reportIngestPressure(this.em, this.instanceId, null).catch(() => undefined);
  }
}
