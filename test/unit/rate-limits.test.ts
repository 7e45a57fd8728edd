import { expect } from 'chai';
import { ConfigError, DEFAULT_RATE_LIMITS, loadConfig } from '../../src/config.ts';
import { RateLimiter } from '../../src/rate-limits/rate-limiter.ts';
import { TokenBuckets } from '../../src/rate-limits/token-buckets.ts';

/** A clock the test moves by hand (milliseconds). */
function manualClock() {
  const clock = { ms: 0, now: () => clock.ms };
  return clock;
}

describe('rate limits: token buckets', () => {
  it('lets a burst through, then one request per 1/rate seconds, and says how long to wait', () => {
    const clock = manualClock();
    const buckets = new TokenBuckets(clock.now);
    const rule = { perSecond: 2, burst: 3 };
    expect([1, 2, 3].map(() => buckets.take('k', rule))).to.deep.equal([0, 0, 0]);
    expect(buckets.take('k', rule)).to.equal(0.5);
    clock.ms += 250;
    expect(buckets.take('k', rule)).to.equal(0.25);
    clock.ms += 250;
    expect(buckets.take('k', rule)).to.equal(0);
    // A long pause refills up to the burst, never beyond it.
    clock.ms += 60_000;
    expect(buckets.remaining('k', rule)).to.equal(3);
  });

  it('keeps one bucket per key', () => {
    const buckets = new TokenBuckets(manualClock().now);
    const rule = { perSecond: 1, burst: 1 };
    expect(buckets.take('alice', rule)).to.equal(0);
    expect(buckets.take('alice', rule)).to.be.above(0);
    expect(buckets.take('bob', rule)).to.equal(0);
  });
});

describe('rate limits: RateLimiter', () => {
  it('refuses with Retry-After and the RateLimit-Policy / RateLimit structured fields', () => {
    const clock = manualClock();
    const limiter = new RateLimiter({ ...DEFAULT_RATE_LIMITS, writes: { perSecond: 0.5, burst: 2 } }, clock.now);
    expect(limiter.check('writes', 'cred')).to.equal(undefined);
    expect(limiter.check('writes', 'cred')).to.equal(undefined);
    const refusal = limiter.check('writes', 'cred')!;
    expect(refusal.retryAfterSeconds).to.equal(2);
    expect(refusal.headers).to.deep.equal({ 'Retry-After': '2', 'RateLimit-Policy': '"writes";q=2;w=4', RateLimit: '"writes";r=0;t=2' });
    clock.ms += 2_000;
    expect(limiter.check('writes', 'cred')).to.equal(undefined);
  });

  it('never limits a class that is off (the webhook by default)', () => {
    const limiter = new RateLimiter(DEFAULT_RATE_LIMITS, manualClock().now);
    expect(limiter.limits('webhook')).to.equal(false);
    for (let i = 0; i < 1_000; i++) expect(limiter.check('webhook', 'session-key')).to.equal(undefined);
  });

  it('takes 1/N of the rate and of the burst when N instances share the limits', () => {
    const clock = manualClock();
    const limiter = new RateLimiter({ ...DEFAULT_RATE_LIMITS, reads: { perSecond: 4, burst: 10 } }, clock.now);
    limiter.setInstanceCount(2);
    let allowed = 0;
    for (let i = 0; i < 10; i++) if (!limiter.check('reads', 'cred')) allowed++;
    expect(allowed).to.equal(5);
    clock.ms += 1_000;
    allowed = 0;
    for (let i = 0; i < 10; i++) if (!limiter.check('reads', 'cred')) allowed++;
    expect(allowed).to.equal(2);
  });
});

describe('rate limits: RATE_LIMIT_<CLASS> settings', () => {
  it('defaults: reads 50/s burst 200, writes 10/s burst 50, streams 2/s burst 20, admin 10/s burst 50, webhook off', () => {
    expect(loadConfig({}).rateLimits).to.deep.equal({
      reads: { perSecond: 50, burst: 200 },
      writes: { perSecond: 10, burst: 50 },
      streams: { perSecond: 2, burst: 20 },
      admin: { perSecond: 10, burst: 50 },
      webhook: undefined,
    });
  });

  it('reads "<per second>,<burst>" and "off"', () => {
    const limits = loadConfig({ RATE_LIMIT_WEBHOOK: '500, 2000', RATE_LIMIT_READS: 'off', RATE_LIMIT_ADMIN: '0.5,3' }).rateLimits;
    expect(limits.webhook).to.deep.equal({ perSecond: 500, burst: 2000 });
    expect(limits.reads).to.equal(undefined);
    expect(limits.admin).to.deep.equal({ perSecond: 0.5, burst: 3 });
  });

  for (const bad of ['50', '0,10', '10,0', '-1,5', 'fast', '1e3,10', '10,5.5']) {
    it(`refuses RATE_LIMIT_WRITES=${bad}, naming the setting`, () => {
      expect(() => loadConfig({ RATE_LIMIT_WRITES: bad })).to.throw(ConfigError, /RATE_LIMIT_WRITES/);
    });
  }
});
