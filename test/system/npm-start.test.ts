import fs from 'node:fs';
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { isAlive } from '../../src/db/embedded-postgres.ts';
import { SERVER_NODE_FLAGS } from '../../src/server-node-flags.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { describeProcesses, killPids, processesWithEnv } from '../../scripts/lib/process-scan.ts';
import { TEST_PG_PORT } from '../../scripts/lib/test-runner-env.ts';
import {
  createDataDir,
  describeRun,
  freePort,
  killAllProcesses,
  postmasterPid,
  serverEnvironment,
  spawnNode,
  spawnProcess,
  startServerProcess,
  stopLeftoverPostgres,
  useEmbedded,
  waitFor,
  type RunningProcess,
  type ServerProcess,
} from '../helpers/server-process.ts';
import { webhookPath } from '../helpers/webhook.ts';

/**
 * The server started the way the README says (`npm start`), stopped the way systemd, a container
 * runtime or a CI job stops it: a signal to the process that was started (npm). Whatever npm
 * started must stop with it: no server, no PostgreSQL left behind.
 */
const GRACE_MS = 10_000;

describe('npm start: signals to the started process', function () {
  this.timeout(120_000);

  const dataDirs: string[] = [];
  let dataDir: string;
  const embeddedPgPort = Number(process.env.TEST_EMBEDDED_PG_PORT ?? TEST_PG_PORT) + 1;

  before(() => {
    dataDir = createDataDir('npm-start');
    dataDirs.push(dataDir);
  });

  afterEach(async () => {
    await killAllProcesses();
    for (const dir of dataDirs) {
      killPids(processesWithEnv('DATA_DIR', dir).filter((pid) => pid !== postmasterPid(dir)));
      if (useEmbedded) await stopLeftoverPostgres(dir);
    }
  });

  after(() => {
    for (const dir of dataDirs) fs.rmSync(dir, { recursive: true, force: true });
  });

  const environment = (dir = dataDir) => serverEnvironment({ dataDir: dir, embeddedPgPort }, { SHUTDOWN_GRACE_MS: String(GRACE_MS) });
  const npmStart = (env: NodeJS.ProcessEnv): RunningProcess => spawnProcess('npm', ['start', '--silent'], env);
  const startWithNpm = (): Promise<ServerProcess> => startServerProcess(environment(), { launch: npmStart, readyWithinMs: 60_000 });

  /** Waits for the process to exit, failing (instead of hanging the suite) after `ms`. */
  async function exitedWithin(run: RunningProcess, ms: number) {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`did not exit within ${ms} ms of the signal\n${describeRun(run)}`)), ms);
    });
    try {
      return await Promise.race([run.exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Processes started for `dir` (npm, sh, node, PostgreSQL and its backends) still alive. */
  const leftovers = (dir = dataDir) => processesWithEnv('DATA_DIR', dir);

  async function expectNothingLeft(dir: string, port: number, pgPid?: number) {
    // Exit of npm comes after the exit of its child, which stopped PostgreSQL first; allow the
    // kernel a moment to reap.
    await waitFor(() => leftovers(dir).length === 0, 1_000);
    const left = leftovers(dir);
    expect(left, `processes left behind:\n${describeProcesses(left)}`).to.deep.equal([]);
    if (pgPid) expect(isAlive(pgPid), `PostgreSQL (pid ${pgPid}) still runs`).to.equal(false);
    let refused = false;
    try {
      await fetch(`http://127.0.0.1:${port}/healthz`);
    } catch {
      refused = true;
    }
    expect(refused, `port ${port} still answers`).to.equal(true);
  }

  async function createSessionKey(): Promise<{ sessionApiKey: string; accessToken: string }> {
    const email = `npm-start-${randomUUID().slice(0, 8)}@example.com`;
    const env = { ...environment(), LOG_LEVEL: undefined };
    const user = spawnNode('scripts/admin.ts', ['create-user', '--email', email], env);
    expect((await user.exited).code, describeRun(user)).to.equal(0);
    const key = spawnNode('scripts/admin.ts', ['create-session-key', '--email', email], env);
    expect((await key.exited).code, describeRun(key)).to.equal(0);
    const last = (run: RunningProcess) => JSON.parse(run.stdout.trimEnd().split('\n').pop()!) as Record<string, string>;
    return { sessionApiKey: last(key).session_api_key!, accessToken: last(user).access_token! };
  }

  it('runs the server with SERVER_NODE_FLAGS: npm start and npm run start:prod name them (src/server-node-flags.ts says why)', () => {
    const { scripts } = JSON.parse(fs.readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> };
    for (const name of ['start', 'start:prod']) {
      expect(scripts[name]!.split(' ').slice(0, 2 + SERVER_NODE_FLAGS.length), name).to.deep.equal(['exec', 'node', ...SERVER_NODE_FLAGS]);
    }
  });

  it('SIGTERM to npm during an in-flight webhook batch: the batch gets 200 and is stored, npm exits 0 within the grace period, nothing is left running', async () => {
    const server = await startWithNpm();
    const { sessionApiKey, accessToken } = await createSessionKey();
    const pgPid = useEmbedded ? postmasterPid(dataDir) : undefined;
    const conversationId = randomUUID();
    const batch = Array.from({ length: 2000 }, () => minimalEvent('MessageEvent'));
    const body = Buffer.from(JSON.stringify(batch));

    const request = http.request({
      host: '127.0.0.1',
      port: server.port,
      method: 'POST',
      path: webhookPath(conversationId),
      headers: { 'Content-Type': 'application/json', 'Content-Length': body.length, 'X-Session-API-Key': sessionApiKey },
      agent: false,
    });
    const response = new Promise<{ status: number; body: string }>((resolve, reject) => {
      request.once('error', reject);
      request.once('response', (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.once('end', () => resolve({ status: res.statusCode!, body: text }));
      });
    });
    const half = Math.floor(body.length / 2);
    await new Promise<void>((resolve) => request.write(body.subarray(0, half), () => resolve()));
    await new Promise((resolve) => setTimeout(resolve, 300));
    const signalled = Date.now();
    server.child.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 100));
    request.end(body.subarray(half));

    const result = await response;
    expect(result.status, result.body).to.equal(200);
    const { code, signal } = await exitedWithin(server, GRACE_MS + 5_000);
    const shutdownMs = Date.now() - signalled;
    console.log(`      npm start, SIGTERM with a batch in flight → npm exited after ${shutdownMs} ms`);
    expect({ code, signal }, describeRun(server)).to.deep.equal({ code: 0, signal: null });
    expect(shutdownMs).to.be.below(GRACE_MS);
    expect(server.stdout).to.include('shutting down').and.include('"stopped"');
    await expectNothingLeft(dataDir, server.port, pgPid);

    // The acknowledged batch is durable: a new `npm start` on the same data reads all of it back.
    const next = await startWithNpm();
    const read = await fetch(`${next.baseUrl}/api/v1/conversations/${conversationId}`, { headers: { 'X-Access-Token': accessToken } });
    expect(read.status).to.equal(200);
    expect(((await read.json()) as { event_count: number }).event_count).to.equal(batch.length);
    next.child.kill('SIGTERM');
    expect((await exitedWithin(next, GRACE_MS + 5_000)).code).to.equal(0);
    await expectNothingLeft(dataDir, next.port);
  });

  it('SIGINT to npm (Ctrl-C) when idle: npm exits 0, nothing is left running, the port is free for the next start', async () => {
    const server = await startWithNpm();
    const pgPid = useEmbedded ? postmasterPid(dataDir) : undefined;
    const signalled = Date.now();
    server.child.kill('SIGINT');
    const { code, signal } = await exitedWithin(server, GRACE_MS + 5_000);
    console.log(`      npm start, SIGINT when idle → npm exited after ${Date.now() - signalled} ms`);
    expect({ code, signal }, describeRun(server)).to.deep.equal({ code: 0, signal: null });
    await expectNothingLeft(dataDir, server.port, pgPid);
  });

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`${signal} to npm during start-up (first start, cluster being initialised): stops cleanly, nothing left, the next start works`, async function () {
      const fresh = createDataDir('npm-start-early');
      dataDirs.push(fresh);
      const port = await freePort();
      const run = npmStart({ ...environment(fresh), PORT: String(port) });
      // Once the server process exists (it logs its first line), it is starting its database.
      const started = await waitFor(() => run.stdout.includes('"msg"'), 30_000);
      expect(started, describeRun(run)).to.equal(true);
      const signalled = Date.now();
      run.child.kill(signal);
      const { code } = await exitedWithin(run, 40_000);
      console.log(`      npm start, ${signal} during start-up → npm exited after ${Date.now() - signalled} ms`);
      expect(code, describeRun(run)).to.equal(0);
      await expectNothingLeft(fresh, port);

      // The half-started data directory is usable.
      const next = await startServerProcess({ ...environment(fresh) }, { launch: npmStart, readyWithinMs: 60_000 });
      next.child.kill('SIGTERM');
      expect((await exitedWithin(next, GRACE_MS + 5_000)).code, describeRun(next)).to.equal(0);
      await expectNothingLeft(fresh, next.port);
    });
  }
});
