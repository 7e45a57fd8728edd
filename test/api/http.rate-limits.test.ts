import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import supertest, { type Response } from 'supertest';
import { createApp, type App } from '../../src/app.ts';
import { DEFAULT_RATE_LIMITS, RATE_LIMIT_CLASSES, type RateLimitConfig } from '../../src/config.ts';
import { createLogger } from '../../src/logger.ts';
import { loadSpec } from '../../src/api/openapi.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { createTestApp } from '../helpers/app.ts';
import { createUserFixture } from '../helpers/fixtures.ts';
import { testConfig, testDatabase } from '../helpers/hooks.ts';
import { specOperations } from '../helpers/spec-operations.ts';
import { postEvents } from '../helpers/webhook.ts';

/** Reads limited to a burst of `burst`, refilled at `perSecond` (slow, so a test's own pace adds at most a token). */
const readsLimited = (perSecond: number, burst: number): RateLimitConfig => ({ ...DEFAULT_RATE_LIMITS, reads: { perSecond, burst } });

type Node = Record<string, unknown>;

function expectRateLimited(response: Response, limitClass: string, quota: number, window: number): number {
  expect(response.status, response.text).to.equal(429);
  const retryAfter = Number(response.headers['retry-after']);
  expect(retryAfter).to.be.a('number').and.to.be.at.least(1);
  expect(response.headers['ratelimit-policy']).to.equal(`"${limitClass}";q=${quota};w=${window}`);
  expect(response.headers.ratelimit).to.equal(`"${limitClass}";r=0;t=${retryAfter}`);
  expect(response.body.detail).to.match(new RegExp(`Too many ${limitClass} requests`));
  return retryAfter;
}

describe('rate limits: the spec', () => {
  const spec = loadSpec() as unknown as Node;
  const operations = specOperations();

  it('every operation declares its x-rate-limit-class beside x-permission, one of the classes', () => {
    const paths = spec.paths as Record<string, Record<string, Node>>;
    const undeclared = operations.filter((op) => !RATE_LIMIT_CLASSES.includes(paths[op.path]![op.method.toLowerCase()]!['x-rate-limit-class'] as never));
    expect(undeclared.map((op) => op.operationId)).to.deep.equal([]);
    // Administration is what a permission guards.
    for (const op of operations.filter((o) => o.permission)) {
      expect(paths[op.path]![op.method.toLowerCase()]!['x-rate-limit-class'], op.operationId).to.equal('admin');
    }
  });

  it('every operation documents the 429 with Retry-After, RateLimit-Policy and RateLimit (the shared response)', () => {
    const paths = spec.paths as Record<string, Record<string, Node>>;
    const headers = ((spec.components as Node).responses as Record<string, Node>).TooManyRequests!.headers as Node;
    expect(Object.keys(headers)).to.include.members(['Retry-After', 'RateLimit-Policy', 'RateLimit']);
    const missing = operations.filter((op) => {
      const responses = paths[op.path]![op.method.toLowerCase()]!.responses as Record<string, Node>;
      return responses['429']?.$ref !== '#/components/responses/TooManyRequests';
    });
    expect(missing.map((op) => op.operationId)).to.deep.equal([]);
  });
});

describe('rate limits: one instance', function () {
  this.timeout(30_000);

  it('answers 429 with Retry-After and the RateLimit fields past the burst, per credential, and again after the window', async () => {
    const client = await createTestApp({ rateLimits: readsLimited(0.5, 3) });
    const alice = await createUserFixture();
    const bob = await createUserFixture();
    for (let i = 0; i < 3; i++) await client.request.get('/api/me').set('X-Access-Token', alice.accessToken).expect(200);
    const refused = await client.request.get('/api/me').set('X-Access-Token', alice.accessToken);
    const retryAfter = expectRateLimited(refused, 'reads', 3, 6);
    // Another credential has a bucket of its own.
    await client.request.get('/api/me').set('X-Access-Token', bob.accessToken).expect(200);
    await sleep(retryAfter * 1000);
    await client.request.get('/api/me').set('X-Access-Token', alice.accessToken).expect(200);
  });

  it('limits requests without a credential per client IP (pages, probes)', async () => {
    const client = await createTestApp({ rateLimits: readsLimited(0.5, 2) });
    await client.request.get('/healthz').expect(200);
    await client.request.get('/openapi.yaml').expect(200);
    expectRateLimited(await client.request.get('/healthz'), 'reads', 2, 4);
  });

  it('checks the limit before the body is read or the permission checked', async () => {
    const client = await createTestApp({ rateLimits: { ...DEFAULT_RATE_LIMITS, admin: { perSecond: 0.5, burst: 1 } } });
    const admin = await createUserFixture({ superAdmin: true });
    await client.request.get('/api/admin/super-admins').set('X-Access-Token', admin.accessToken).expect(200);
    // Not JSON: a 415 if the body were read first.
    const refused = await client.request.post('/api/admin/verified-models').set('X-Access-Token', admin.accessToken).set('Content-Type', 'text/plain').send('x');
    expectRateLimited(refused, 'admin', 1, 2);
  });

  it('leaves the webhook unlimited by default and limits it when RATE_LIMIT_WEBHOOK is set', async () => {
    const user = await createUserFixture();
    const unlimited = await createTestApp();
    const conversationId = randomUUID();
    for (let i = 0; i < 30; i++) await postEvents(unlimited, user.sessionApiKey, conversationId, [minimalEvent('PauseEvent')]).expect(200);
    const limited = await createTestApp({ rateLimits: { ...DEFAULT_RATE_LIMITS, webhook: { perSecond: 0.5, burst: 2 } } });
    await postEvents(limited, user.sessionApiKey, conversationId, [minimalEvent('PauseEvent')]).expect(200);
    await postEvents(limited, user.sessionApiKey, conversationId, [minimalEvent('PauseEvent')]).expect(200);
    expectRateLimited(await postEvents(limited, user.sessionApiKey, conversationId, [minimalEvent('PauseEvent')]), 'webhook', 2, 4);
  });
});

describe('rate limits: two instances on one database', function () {
  this.timeout(60_000);
  const BURST = 8;
  const PER_SECOND = 0.5;
  const built: App[] = [];

  after(async () => {
    for (const { rateLimitInstances } of built) await rateLimitInstances.stop();
  });

  it('hold the limit together within the stated error (each enforces 1/N), and recover after the window', async () => {
    for (let i = 0; i < 2; i++) {
      built.push(
        await createApp({
          config: { ...testConfig(), rateLimits: readsLimited(PER_SECOND, BURST) },
          logger: createLogger('silent'),
          orm: testDatabase().orm,
          database: testDatabase(),
        }),
      );
    }
    const [first, second] = built as [App, App];
    await first.rateLimitInstances.start();
    await second.rateLimitInstances.start();
    // The first counted itself alone at its start; its next heartbeat sees the second.
    await first.rateLimitInstances.beat();
    const instances = await testDatabase().orm.em.getConnection().execute<{ n: number }[]>('select count(*)::int as n from rate_limit_instances');
    expect(instances[0]!.n).to.equal(2);

    const user = await createUserFixture();
    const agents = [supertest(first.app.callback()), supertest(second.app.callback())];
    const started = performance.now();
    const statuses: number[] = [];
    // A client spread over both instances, as a round-robin load balancer spreads it.
    for (let i = 0; i < 3 * BURST; i++) statuses.push((await agents[i % 2]!.get('/api/me').set('X-Access-Token', user.accessToken)).status);
    const elapsedSeconds = (performance.now() - started) / 1000;
    const accepted = statuses.filter((s) => s === 200).length;
    expect(statuses.filter((s) => s !== 200 && s !== 429)).to.deep.equal([]);
    // The stated error: the burst, plus what the rate refills while the requests are sent, plus one token per instance for rounding.
    expect(accepted).to.be.at.least(BURST);
    expect(accepted).to.be.at.most(BURST + Math.ceil(PER_SECOND * elapsedSeconds) + 2);

    const refused = await agents[0]!.get('/api/me').set('X-Access-Token', user.accessToken);
    const retryAfter = expectRateLimited(refused, 'reads', BURST, BURST / PER_SECOND);
    await sleep(retryAfter * 1000);
    await agents[0]!.get('/api/me').set('X-Access-Token', user.accessToken).expect(200);
    await agents[1]!.get('/api/me').set('X-Access-Token', user.accessToken).expect(200);

    // An instance that stops leaves the count: the other takes the whole limit at its next heartbeat.
    await second.rateLimitInstances.stop();
    await first.rateLimitInstances.beat();
    const left = await testDatabase().orm.em.getConnection().execute<{ n: number }[]>('select count(*)::int as n from rate_limit_instances');
    expect(left[0]!.n).to.equal(1);
  });
});
