import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { minimalEvent } from '../fixtures/events.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { describeRun, killAllProcesses, startServerProcess, type ServerProcess } from '../helpers/server-process.ts';
import { TcpProxy } from '../helpers/tcp-proxy.ts';
import { webhookPath } from '../helpers/webhook.ts';

/**
 * The database fails under load, through a TCP proxy on loopback between a real server process
 * and PostgreSQL: requests get 503 with Retry-After within a bound (never a hang, never a 500),
 * /readyz turns 503, and the server recovers by itself when the database returns.
 */
const ACQUIRE_TIMEOUT_MS = 1_000;
const QUERY_TIMEOUT_MS = 2_000;
/** No request may take longer than this while the database is gone or stalled. */
const RESPONSE_BOUND_MS = QUERY_TIMEOUT_MS + 2_000 + ACQUIRE_TIMEOUT_MS + 1_000;
const CLIENTS = 4;

interface Outcome {
  status: number;
  retryAfter: string | null;
  started: number;
  ms: number;
  conversationId: string;
  batch: Record<string, unknown>[];
}

describe('database faults (TCP proxy between server and PostgreSQL)', function () {
  this.timeout(120_000);

  let proxy: TcpProxy;
  let server: ServerProcess;
  let user: UserFixture;

  beforeEach(async () => {
    const target = new URL(testDatabase().url);
    proxy = await TcpProxy.start(Number(target.port));
    const proxied = new URL(target);
    proxied.port = String(proxy.port);
    user = await createUserFixture();
    server = await startServerProcess({
      ...process.env,
      DATABASE_URL: proxied.toString(),
      LOG_LEVEL: 'info',
      DB_POOL_SIZE: '8',
      DB_ACQUIRE_TIMEOUT_MS: String(ACQUIRE_TIMEOUT_MS),
      DB_QUERY_TIMEOUT_MS: String(QUERY_TIMEOUT_MS),
      READINESS_TIMEOUT_MS: '1000',
      CREDENTIAL_CACHE_TTL_MS: '0',
    });
  });

  afterEach(async () => {
    await killAllProcesses();
    await proxy.close();
  });

  /** `CLIENTS` loops posting small batches until `stop()`; every outcome recorded. */
  function startLoad() {
    const outcomes: Outcome[] = [];
    let running = true;
    const loops = Array.from({ length: CLIENTS }, async (_, client) => {
      const conversationId = randomUUID();
      while (running) {
        const batch = Array.from({ length: 5 }, () => minimalEvent('MessageEvent'));
        const started = Date.now();
        let status = 0;
        let retryAfter: string | null = null;
        try {
          const response = await fetch(`${server.baseUrl}${webhookPath(conversationId)}`, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json', 'X-Session-API-Key': user.sessionApiKey },
            body: JSON.stringify(batch),
            signal: AbortSignal.timeout(RESPONSE_BOUND_MS * 3),
          });
          status = response.status;
          retryAfter = response.headers.get('retry-after');
          await response.arrayBuffer();
        } catch {
          status = -1; // no answer at all (a hang cut by the client timeout, or a reset)
        }
        outcomes.push({ status, retryAfter, started, ms: Date.now() - started, conversationId, batch });
        if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 50 + client * 10));
      }
    });
    return {
      outcomes,
      async stop() {
        running = false;
        await Promise.all(loops);
      },
    };
  }

  async function readiness(): Promise<{ status: number; ms: number }> {
    const started = Date.now();
    const response = await fetch(`${server.baseUrl}/readyz`, { signal: AbortSignal.timeout(10_000) });
    await response.arrayBuffer();
    return { status: response.status, ms: Date.now() - started };
  }

  /** Polls /readyz until it answers `status`; how long that took from `since`. */
  async function readyzBecomes(status: number, since: number, withinMs: number): Promise<number> {
    while (Date.now() - since < withinMs) {
      const probe = await readiness();
      expect(probe.ms, '/readyz answers within its bound').to.be.below(2_000);
      if (probe.status === status) return Date.now() - since;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`/readyz did not answer ${status} within ${withinMs} ms`);
  }

  async function storedIds(conversationId: string): Promise<string[]> {
    const rows = (await testDatabase()
      .orm.em.getConnection()
      .execute(
        `select event_id as id from conversation_events where conversation_id = ?`,
        [conversationId],
      )) as { id: string }[];
    return rows.map((row) => row.id);
  }

  async function checkOutcomes(outcomes: Outcome[], label: string) {
    const statuses = [...new Set(outcomes.map((o) => o.status))].sort();
    expect(statuses, `${label}: only 200 and 503\n${describeRun(server)}`).to.satisfy((s: number[]) => s.every((x) => x === 200 || x === 503));
    const unavailable = outcomes.filter((o) => o.status === 503);
    expect(unavailable.length, `${label}: some requests met the fault`).to.be.greaterThan(0);
    for (const o of unavailable) expect(o.retryAfter, '503 carries Retry-After').to.match(/^\d+$/);
    const slowest = Math.max(...outcomes.map((o) => o.ms));
    expect(slowest, `${label}: slowest response`).to.be.below(RESPONSE_BOUND_MS);
    // Every acknowledged batch is stored in full; every refused one in full or not at all.
    const stored = new Map<string, Set<string>>();
    for (const id of new Set(outcomes.map((o) => o.conversationId))) stored.set(id, new Set(await storedIds(id)));
    for (const o of outcomes) {
      const ids = o.batch.map((e) => e.id as string);
      const present = ids.filter((id) => stored.get(o.conversationId)!.has(id)).length;
      if (o.status === 200) expect(present, 'an acknowledged batch is stored in full').to.equal(ids.length);
      else expect([0, ids.length], 'a refused batch is stored in full or not at all').to.include(present);
    }
    // Retrying the refused batches stores each event once.
    for (const o of unavailable) {
      const retry = await fetch(`${server.baseUrl}${webhookPath(o.conversationId)}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Session-API-Key': user.sessionApiKey },
        body: JSON.stringify(o.batch),
      });
      expect(retry.status).to.equal(200);
    }
    for (const id of stored.keys()) {
      const ids = await storedIds(id);
      const sent = new Set(outcomes.filter((o) => o.conversationId === id).flatMap((o) => o.batch.map((e) => e.id as string)));
      expect(ids.length, 'no duplicates').to.equal(new Set(ids).size);
      expect(new Set(ids)).to.deep.equal(sent);
    }
    return { slowest, unavailable: unavailable.length, total: outcomes.length };
  }

  for (const fault of ['refuse', 'stall'] as const) {
    const what = fault === 'refuse' ? 'the database goes away (connections reset, new ones refused)' : 'the database stalls (connections accepted, nothing answered)';
    it(`${what} mid-load: 503 + Retry-After within the bound, /readyz 503, recovery without restart`, async () => {
      const load = startLoad();
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      const before = load.outcomes.length;
      expect(load.outcomes.every((o) => o.status === 200), 'all 200 before the fault').to.equal(true);

      const faultAt = Date.now();
      if (fault === 'refuse') await proxy.refuse();
      else proxy.stall();
      const readyzDownMs = await readyzBecomes(503, faultAt, 10_000);
      await new Promise((resolve) => setTimeout(resolve, 4_000));
      const first503 = load.outcomes.find((o) => o.started >= faultAt && o.status === 503) ??
        load.outcomes.find((o) => o.status === 503);
      expect(first503, `a 503 during the fault\n${describeRun(server)}`).to.not.equal(undefined);

      const restoredAt = Date.now();
      await proxy.restore();
      const readyzUpMs = await readyzBecomes(200, restoredAt, 15_000);
      await waitForSuccess(load.outcomes, restoredAt, 15_000);
      const firstOk = load.outcomes.find((o) => o.started >= restoredAt && o.status === 200)!;
      const recoveryMs = firstOk.started + firstOk.ms - restoredAt;
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      const settled = Date.now();
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      await load.stop();
      const after = load.outcomes.filter((o) => o.started >= settled);
      expect(after.length).to.be.greaterThan(0);
      expect(after.every((o) => o.status === 200), 'all 200 once recovered').to.equal(true);

      const time503 = first503!.started + first503!.ms - faultAt;
      const summary = await checkOutcomes(load.outcomes, fault);
      console.log(
        `      ${fault}: first 503 ${time503} ms after the fault, slowest response ${summary.slowest} ms, ` +
          `/readyz 503 after ${readyzDownMs} ms, 200 again ${readyzUpMs} ms after restore, first webhook 200 ${recoveryMs} ms after restore ` +
          `(${summary.total} requests, ${summary.unavailable} × 503, ${before} before the fault)`,
      );
      expect(server.stdout + server.stderr).to.not.include('unhandled error');
      await checkOutageLog(summary.unavailable);
    });
  }

  /**
   * The outage logged like an outage: per component one line when the database became unreachable
   * and one when it was back, with how many operations failed meanwhile (a pool reconnecting may
   * make a component see it twice), not one error line per refused request or failed poll.
   */
  async function checkOutageLog(refusedRequests: number) {
    const lines = server.stdout
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { level: number; msg: string; component?: string; failed?: number });
    const errors = lines.filter((line) => line.level >= 50);
    const summary = `${errors.length} error lines:\n${errors.map((line) => line.msg).join('\n')}`;
    expect(errors.length, summary).to.be.within(1, 8);
    expect(errors.every((line) => / the database is unreachable$/.test(line.msg)), summary).to.equal(true);
    const down = errors.filter((line) => line.component === 'request path');
    const back = lines.filter((line) => line.component === 'request path' && /reachable again/.test(line.msg));
    expect(down.length, summary).to.be.within(1, 2);
    expect(back.length, 'each request-path outage ends with a line').to.equal(down.length);
    expect(back.reduce((sum, line) => sum + line.failed!, 0), 'the refused requests, counted').to.equal(refusedRequests);
    // The metrics keep every count.
    const metrics = await (await fetch(`${server.baseUrl}/metrics`)).text();
    expect(metrics).to.include(`database_unavailable_total{component="request path"} ${refusedRequests}`);
    expect(metrics).to.match(/database_outages_total\{component="request path"\} [12]\b/);
    console.log(`      outage log: ${errors.length} error lines, ${lines.filter((line) => /reachable again/.test(line.msg)).length} lines "reachable again", for ${refusedRequests} refused requests`);
  }

  async function waitForSuccess(outcomes: Outcome[], since: number, withinMs: number) {
    while (Date.now() - since < withinMs) {
      if (outcomes.some((o) => o.started >= since && o.status === 200)) return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`no webhook 200 within ${withinMs} ms of the restore\n${describeRun(server)}`);
  }
});
