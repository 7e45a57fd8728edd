import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../logger.ts';
import { beatAndCountInstances, forgetInstance } from './queries.ts';
import type { RateLimiter } from './rate-limiter.ts';

/** Time between two heartbeats; an instance silent for three of them no longer counts. */
export const INSTANCE_HEARTBEAT_MS = 5_000;
const FRESH_MS = 3 * INSTANCE_HEARTBEAT_MS;

/**
 * Counts the running instances through a heartbeat table (`rate_limit_instances`), off the request
 * path, and gives each its share of the rate limits. Started by `main.ts` (or a test), like the
 * delivery worker; an app never started counts itself alone.
 */
export class RateLimitInstances {
  readonly instanceId = randomUUID();
  private timer: NodeJS.Timeout | undefined;
  private failing = false;

  constructor(
    private readonly em: EntityManager,
    private readonly limiter: RateLimiter,
    private readonly log: Logger,
  ) {}

  /** Beats once (so the share is right from the first request), then every `INSTANCE_HEARTBEAT_MS`. */
  async start(): Promise<void> {
    await this.beat();
    this.timer = setInterval(() => void this.beat(), INSTANCE_HEARTBEAT_MS);
    this.timer.unref();
  }

  /** Marks this instance alive and takes the share for the instances seen; on failure keeps the last one. */
  async beat(): Promise<void> {
    try {
      const others = await beatAndCountInstances(this.em, this.instanceId, FRESH_MS);
      this.limiter.setInstanceCount(others + 1);
      if (this.failing) this.log.info({ instances: others + 1 }, 'rate limit heartbeat works again');
      this.failing = false;
    } catch (error) {
      // One line per outage, not one per beat.
      if (!this.failing) this.log.warn({ err: error }, 'rate limit heartbeat failed; keeping the last instance count until it works again');
      this.failing = true;
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await forgetInstance(this.em, this.instanceId).catch(() => undefined);
  }
}
