import type { RateLimitRule } from '../config.ts';

interface Bucket {
  tokens: number;
  /** `now()` when `tokens` was last computed. */
  at: number;
}

/** Buckets kept before full ones are dropped (a full bucket is the same as none). */
const SWEEP_ABOVE = 100_000;

/**
 * In-memory token buckets by key: each request takes one token; tokens come back at `perSecond` up to
 * `burst`. No I/O: the check on the request path is a map lookup and some arithmetic.
 */
export class TokenBuckets {
  private readonly buckets = new Map<string, Bucket>();

  constructor(private readonly now: () => number = () => performance.now()) {}

  /** Takes a token for `key`: 0 when there was one, else the seconds until there will be one. */
  take(key: string, rule: RateLimitRule): number {
    const now = this.now();
    let bucket = this.buckets.get(key);
    if (!bucket) {
      if (this.buckets.size >= SWEEP_ABOVE) this.sweep(now, rule);
      bucket = { tokens: rule.burst, at: now };
      this.buckets.set(key, bucket);
    } else {
      bucket.tokens = Math.min(rule.burst, bucket.tokens + ((now - bucket.at) / 1000) * rule.perSecond);
      bucket.at = now;
    }
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return (1 - bucket.tokens) / rule.perSecond;
  }

  /** Tokens left for `key` (the burst when it has no bucket), without taking one. */
  remaining(key: string, rule: RateLimitRule): number {
    const bucket = this.buckets.get(key);
    if (!bucket) return rule.burst;
    return Math.min(rule.burst, bucket.tokens + ((this.now() - bucket.at) / 1000) * rule.perSecond);
  }

  get size(): number {
    return this.buckets.size;
  }

  /** Drops the buckets that have refilled; if none has (a flood of new keys), starts over. */
  private sweep(now: number, rule: RateLimitRule): void {
    for (const [key, bucket] of this.buckets) {
      if (bucket.tokens + ((now - bucket.at) / 1000) * rule.perSecond >= rule.burst) this.buckets.delete(key);
    }
    if (this.buckets.size >= SWEEP_ABOVE) this.buckets.clear();
  }
}
