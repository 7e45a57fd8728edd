import { RATE_LIMIT_CLASSES, type RateLimitClass, type RateLimitConfig, type RateLimitRule } from '../config.ts';
import { TokenBuckets } from './token-buckets.ts';

/** A request over its limit: what the 429 says (IETF draft-ietf-httpapi-ratelimit-headers, structured fields). */
export interface RateLimitRefusal {
  readonly limitClass: RateLimitClass;
  readonly retryAfterSeconds: number;
  readonly headers: Readonly<Record<string, string>>;
}

interface ClassLimit {
  /** The whole limit, as configured and as `RateLimit-Policy` states it. */
  readonly rule: RateLimitRule;
  /** This instance's share of it: the rate and the burst divided by the instances running. */
  share: RateLimitRule;
  readonly buckets: TokenBuckets;
  /** `RateLimit-Policy` of the class: `"reads";q=200;w=4` (the burst, and the seconds an empty bucket takes to refill). */
  readonly policy: string;
}

/**
 * The rate limits by class, per credential (or client IP). Each of N instances enforces 1/N of every
 * limit in memory (N from `RateLimitInstances`, a heartbeat table): nothing on the request path waits
 * for the database. A class without a rule (`off`) costs one map lookup.
 */
export class RateLimiter {
  private readonly byClass = new Map<RateLimitClass, ClassLimit>();
  private instances = 1;

  constructor(config: RateLimitConfig, now?: () => number) {
    for (const limitClass of RATE_LIMIT_CLASSES) {
      const rule = config[limitClass];
      if (!rule) continue;
      const window = Math.max(1, Math.ceil(rule.burst / rule.perSecond));
      this.byClass.set(limitClass, { rule, share: rule, buckets: new TokenBuckets(now), policy: `"${limitClass}";q=${rule.burst};w=${window}` });
    }
  }

  /** Whether `limitClass` has a limit at all (`off`: no). */
  limits(limitClass: RateLimitClass): boolean {
    return this.byClass.has(limitClass);
  }

  /** How many instances share the limits (at least 1). */
  get instanceCount(): number {
    return this.instances;
  }

  /** Splits every limit among `count` instances. */
  setInstanceCount(count: number): void {
    this.instances = Math.max(1, Math.floor(count));
    for (const limit of this.byClass.values()) {
      limit.share = { perSecond: limit.rule.perSecond / this.instances, burst: Math.max(1, limit.rule.burst / this.instances) };
    }
  }

  /** Takes one request of `limitClass` for `key`; the refusal when it is over the limit. */
  check(limitClass: RateLimitClass, key: string): RateLimitRefusal | undefined {
    const limit = this.byClass.get(limitClass);
    if (!limit) return undefined;
    const wait = limit.buckets.take(key, limit.share);
    if (wait === 0) return undefined;
    const retryAfterSeconds = Math.max(1, Math.ceil(wait));
    return {
      limitClass,
      retryAfterSeconds,
      headers: {
        'Retry-After': String(retryAfterSeconds),
        'RateLimit-Policy': limit.policy,
        RateLimit: `"${limitClass}";r=0;t=${retryAfterSeconds}`,
      },
    };
  }
}
