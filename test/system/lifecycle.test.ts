import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { expect } from 'chai';
import { isAlive } from '../../src/db/embedded-postgres.ts';
import { minimalEvent } from '../fixtures/events.ts';
import {
  createDataDir,
  describeRun,
  freePort,
  killAllProcesses,
  postmasterPid,
  ROOT,
  serverEnvironment,
  spawnNode,
  startServerProcess,
  stopLeftoverPostgres,
  stopWith,
  useEmbedded,
  type ServerProcess,
} from '../helpers/server-process.ts';
import { webhookPath } from '../helpers/webhook.ts';

const READY_WITHIN_MS = 30_000;

describe('server process', function () {
  this.timeout(120_000);

  /** One data directory for the file: the cluster is initialised once, by the first start. */
  let dataDir: string;
  let embeddedPgPort: number;

  before(async function () {
    dataDir = createDataDir('lifecycle');
    embeddedPgPort = await freePort();
  });

  afterEach(async () => {
    await killAllProcesses();
    if (useEmbedded) await stopLeftoverPostgres(dataDir);
  });

  after(async () => {
    if (useEmbedded) await stopLeftoverPostgres(dataDir);
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  /** The environment of the server and the CLI: embedded PostgreSQL under `dataDir`, or DATABASE_URL. */
  const environment = (extra: NodeJS.ProcessEnv = {}) => serverEnvironment({ dataDir, embeddedPgPort }, extra);

  const startServer = (): Promise<ServerProcess> => startServerProcess(environment(), { readyWithinMs: READY_WITHIN_MS });

  /** Runs the admin CLI against the same database as the server; returns its JSON result. */
  async function admin(...args: string[]): Promise<Record<string, unknown>> {
    const run = spawnNode('scripts/admin.ts', args, environment({ LOG_LEVEL: undefined }));
    const { code } = await run.exited;
    expect(code, describeRun(run)).to.equal(0);
    return JSON.parse(run.stdout.trimEnd().split('\n').pop()!) as Record<string, unknown>;
  }

  /** A user with an access token and a session API key, issued through the CLI. */
  async function createUser(): Promise<{ email: string; accessToken: string; sessionApiKey: string }> {
    const email = `lifecycle-${randomUUID().slice(0, 8)}@example.com`;
    const user = await admin('create-user', '--email', email);
    const key = await admin('create-session-key', '--email', email);
    return { email, accessToken: user.access_token as string, sessionApiKey: key.session_api_key as string };
  }

  it('starts and serves /readyz 200 within 30 s', async () => {
    const cold = await startServer();
    console.log(`      start-up until /readyz 200: ${cold.startupMs} ms (${useEmbedded ? 'embedded PostgreSQL, first start with initdb' : 'DATABASE_URL'})`);
    expect(cold.startupMs).to.be.below(READY_WITHIN_MS);
    expect(cold.stdout).to.include('listening on http');
    const { code } = await stopWith(cold, 'SIGTERM');
    expect(code, describeRun(cold)).to.equal(0);

    const warm = await startServer();
    console.log(`      start-up until /readyz 200: ${warm.startupMs} ms (second start on the same data)`);
    expect(warm.startupMs).to.be.below(READY_WITHIN_MS);
  });

  it('on SIGTERM finishes an in-flight request with 200, exits 0 and (embedded) stops its PostgreSQL', async () => {
    const server = await startServer();
    const user = await createUser();
    const conversationId = randomUUID();
    const batch = Array.from({ length: 3000 }, () => minimalEvent('MessageEvent'));
    const body = Buffer.from(JSON.stringify(batch));
    const pgPid = useEmbedded ? postmasterPid(dataDir) : undefined;
    if (useEmbedded) expect(pgPid, 'postmaster.pid of the embedded PostgreSQL').to.be.a('number');

    // Send the headers and half of the body, so the server is certainly handling the request when
    // SIGTERM arrives; the rest follows after the signal.
    const request = http.request({
      host: '127.0.0.1',
      port: server.port,
      method: 'POST',
      path: webhookPath(conversationId),
      headers: { 'Content-Type': 'application/json', 'Content-Length': body.length, 'X-Session-API-Key': user.sessionApiKey },
      agent: false,
    });
    const response = new Promise<{ status: number; body: string }>((resolve, reject) => {
      request.once('error', reject);
      request.once('response', (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.once('end', () => resolve({ status: res.statusCode!, body: text }));
        res.once('error', reject);
      });
    });
    const half = Math.floor(body.length / 2);
    await new Promise<void>((resolve) => request.write(body.subarray(0, half), () => resolve()));
    await new Promise((resolve) => setTimeout(resolve, 300));
    server.child.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 100));
    request.end(body.subarray(half));

    const result = await response;
    expect(result.status, result.body).to.equal(200);
    expect(JSON.parse(result.body)).to.deep.equal({ success: true });
    const { code, signal } = await server.exited;
    expect({ code, signal }, describeRun(server)).to.deep.equal({ code: 0, signal: null });
    expect(server.stdout).to.include('shutting down');

    if (useEmbedded) {
      expect(fs.existsSync(path.join(dataDir, 'pg', 'postmaster.pid')), 'postmaster.pid still exists').to.equal(false);
      expect(isAlive(pgPid!), `PostgreSQL (pid ${pgPid}) still runs`).to.equal(false);
    }

    // What the 200 acknowledged is durable: a new server reads all of it back.
    const next = await startServer();
    const conversation = await fetch(`${next.baseUrl}/api/v1/conversations/${conversationId}`, {
      headers: { 'X-Access-Token': user.accessToken },
    });
    expect(conversation.status).to.equal(200);
    expect(((await conversation.json()) as { event_count: number }).event_count).to.equal(batch.length);
  });

  it('on SIGINT (Ctrl-C) with nothing in flight exits 0, stops listening and (embedded) stops its PostgreSQL', async () => {
    const server = await startServer();
    const pgPid = useEmbedded ? postmasterPid(dataDir) : undefined;
    const { code, signal } = await stopWith(server, 'SIGINT');
    expect({ code, signal }, describeRun(server)).to.deep.equal({ code: 0, signal: null });
    let refused = false;
    try {
      await fetch(`${server.baseUrl}/healthz`);
    } catch {
      refused = true;
    }
    expect(refused, 'the port still answers after exit').to.equal(true);
    if (useEmbedded) expect(isAlive(pgPid!), `PostgreSQL (pid ${pgPid}) still runs`).to.equal(false);
  });

  it('admin CLI works while the server runs (sharing its database) and its token works against the server', async () => {
    const server = await startServer();
    const pgPidBefore = useEmbedded ? postmasterPid(dataDir) : undefined;

    const email = `cli-${randomUUID().slice(0, 8)}@example.com`;
    const created = await admin('create-user', '--email', email, '--super-admin');
    expect(created).to.have.all.keys('user_id', 'email', 'access_token');

    // The CLI attached to the server's PostgreSQL and left it running.
    if (useEmbedded) {
      expect(postmasterPid(dataDir)).to.equal(pgPidBefore);
      expect(isAlive(pgPidBefore!)).to.equal(true);
    }
    expect((await fetch(`${server.baseUrl}/readyz`)).status).to.equal(200);

    const response = await fetch(`${server.baseUrl}/api/admin/super-admins`, {
      headers: { 'X-Access-Token': created.access_token as string },
    });
    expect(response.status).to.equal(200);
    const { super_admins } = (await response.json()) as { super_admins: { user_id: string; email: string }[] };
    expect(super_admins).to.deep.include({ user_id: created.user_id, email });
    // A second CLI run in a row still attaches (the first did not take the database with it).
    const listed = await admin('list-users');
    expect((listed.users as { email: string }[]).map((user) => user.email)).to.include(email);
  });

  it('after a SIGKILL leaves its PostgreSQL orphaned, a new server on the same data directory starts fine', async function () {
    if (!useEmbedded) this.skip();
    const first = await startServer();
    const user = await createUser();
    const orphanPid = postmasterPid(dataDir)!;
    expect(orphanPid).to.be.a('number');

    const { signal } = await stopWith(first, 'SIGKILL');
    expect(signal).to.equal('SIGKILL');
    expect(isAlive(orphanPid), 'the PostgreSQL of the killed server should still run (orphaned)').to.equal(true);

    const second = await startServer();
    console.log(`      start-up with an orphaned PostgreSQL to stop first: ${second.startupMs} ms`);
    expect(isAlive(orphanPid), 'the orphaned PostgreSQL still runs').to.equal(false);
    const newPid = postmasterPid(dataDir);
    expect(newPid).to.be.a('number').and.not.equal(orphanPid);
    expect(second.stdout).to.include('left behind');

    // Data written before the crash is there, and credentials still work.
    const response = await fetch(`${second.baseUrl}/api/v1/conversations`, { headers: { 'X-Access-Token': user.accessToken } });
    expect(response.status).to.equal(200);

    const { code } = await stopWith(second, 'SIGTERM');
    expect(code, describeRun(second)).to.equal(0);
    expect(isAlive(newPid!)).to.equal(false);
  });

  it('exits non-zero with one line naming the key when stored secrets use a key SECRETS_ENCRYPTION_KEYS lacks', async () => {
    const keyOf = (id: string) => `${id}:${randomBytes(32).toString('base64')}`;
    const k1 = keyOf('k1');
    const server = await startServerProcess(environment({ SECRETS_ENCRYPTION_KEYS: k1 }), { readyWithinMs: READY_WITHIN_MS });
    const user = await createUser();
    const registered = await fetch(`${server.baseUrl}/integration/issuetracker/workspaces`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Access-Token': user.accessToken },
      body: JSON.stringify({ workspace_name: 'acme', webhook_secret: 'whsec_acme', svc_acc_email: 'bot@acme.example', svc_acc_api_key: 'key_acme', is_active: true }),
    });
    expect(registered.status).to.equal(201);
    expect((await stopWith(server, 'SIGTERM')).code, describeRun(server)).to.equal(0);

    const run = spawnNode('src/main.ts', [], { ...environment({ SECRETS_ENCRYPTION_KEYS: keyOf('k2') }), PORT: String(await freePort()) });
    const { code } = await run.exited;
    expect(code, describeRun(run)).to.equal(1);
    const lines = run.stderr.trimEnd().split('\n');
    expect(lines, run.stderr).to.have.length(1);
    expect(lines[0]).to.match(/^failed to start: stored workspace secrets are encrypted with key id\(s\) k1, which SECRETS_ENCRYPTION_KEYS does not hold/);
    expect(run.stdout).not.to.include('server listening');
  });

  for (const [name, value, message] of [
    ['PORT', 'abc', /PORT/],
    ['EMBEDDED_PG_PORT', '80', /EMBEDDED_PG_PORT/],
    ['LOG_LEVEL', 'loud', /LOG_LEVEL/],
    ['DATABASE_URL', 'mysql://localhost/db', /DATABASE_URL/],
  ] as const) {
    it(`exits non-zero with a one-line message on stderr for a bad configuration (${name}=${value})`, async function () {
      if (name === 'EMBEDDED_PG_PORT' && !useEmbedded) this.skip();
      const untouched = path.join(ROOT, '.data', `lifecycle-unused-${randomBytes(6).toString('hex')}`);
      const env = { ...environment(), DATA_DIR: untouched, PORT: String(await freePort()), [name]: value };
      const run = spawnNode('src/main.ts', [], env);
      const { code } = await run.exited;
      expect(code, describeRun(run)).to.not.equal(0);
      expect(code).to.not.equal(null);
      const lines = run.stderr.trimEnd().split('\n');
      expect(lines, run.stderr).to.have.length(1);
      expect(lines[0]).to.match(message);
      expect(run.stderr).to.not.match(/\n\s+at /); // no stack trace
      // Configuration is checked before anything is started or written.
      expect(fs.existsSync(untouched), 'the data directory was created').to.equal(false);
    });
  }
});
