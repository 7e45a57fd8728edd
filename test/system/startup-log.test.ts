import fs from 'node:fs';
import net from 'node:net';
import { expect } from 'chai';
import { DEFAULT_EMBEDDED_PG_PORT, loadConfig } from '../../src/config.ts';
import { firstSuperAdminCommand, listeningUrl } from '../../src/startup-log.ts';
import { PACKAGE_ROOT } from '../../src/package-root.ts';
import { serverNodeArgs } from '../../src/server-node-flags.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';
import {
  createDataDir,
  describeRun,
  freePort,
  killAllProcesses,
  serverEnvironment,
  spawnProcess,
  startServerProcess,
  stopLeftoverPostgres,
  stopWith,
  useEmbedded,
  waitFor,
  type ServerProcess,
} from '../helpers/server-process.ts';

/** The JSON log lines of a server process. */
function logLines(server: ServerProcess): { msg?: string; [key: string]: unknown }[] {
  return server.stdout
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { msg?: string });
}

describe('start-up log: where to go and how to begin', function () {
  this.timeout(120_000);

  let dataDir: string;
  let embeddedPgPort: number;

  before(async () => {
    dataDir = createDataDir('startup-log');
    embeddedPgPort = await freePort();
  });

  afterEach(async () => {
    await killAllProcesses();
    if (useEmbedded) await stopLeftoverPostgres(dataDir);
  });

  after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  const environment = () => serverEnvironment({ dataDir, embeddedPgPort });

  it('names the URL and /docs on one line and, until a user exists, the command that creates the first super admin, which works as printed', async () => {
    const server = await startServerProcess(environment());
    await waitFor(() => server.stdout.includes('no user yet'), 5_000);
    const lines = logLines(server);
    const url = `http://127.0.0.1:${server.port}`;
    const listening = lines.find((line) => line.msg?.startsWith('listening on'));
    expect(listening, describeRun(server)).to.include({ url, docs: `${url}/docs`, msg: `listening on ${url} — API reference: ${url}/docs` });
    expect((await fetch(`${url}/docs`)).status, 'the logged /docs answers').to.equal(200);

    const hint = lines.find((line) => line.msg?.startsWith('no user yet'));
    expect(hint, describeRun(server)).to.not.equal(undefined);
    const command = hint!.command as string;
    expect(hint!.msg).to.include(command);
    if (useEmbedded) expect(command).to.equal(`DATA_DIR=${dataDir} EMBEDDED_PG_PORT=${embeddedPgPort} npm run admin -- create-user --email admin@example.com --super-admin`);
    else expect(hint!.msg).to.include("with this server's DATABASE_URL");

    // Pasted as printed into a shell that knows nothing of the server's data directory.
    const shellEnv: NodeJS.ProcessEnv = { ...process.env };
    delete shellEnv.DATA_DIR;
    delete shellEnv.EMBEDDED_PG_PORT;
    const admin = spawnProcess('bash', ['-c', command], shellEnv);
    const { code } = await admin.exited;
    expect(code, describeRun(admin)).to.equal(0);
    const { access_token: token } = JSON.parse(admin.stdout.trim().split('\n').pop()!) as { access_token: string };
    rememberSecret(token);
    const superAdmins = await fetch(`${url}/api/admin/super-admins`, { headers: { 'X-Access-Token': token } });
    expect(superAdmins.status).to.equal(200);
    expect(await superAdmins.json()).to.have.nested.property('super_admins[0].email', 'admin@example.com');
    expect((await stopWith(server, 'SIGTERM')).code).to.equal(0);

    // Once a user exists the hint is gone; the URL line stays.
    const again = await startServerProcess(environment());
    await waitFor(() => again.stdout.includes('listening on'), 5_000);
    expect(logLines(again).some((line) => line.msg?.startsWith('listening on'))).to.equal(true);
    expect(again.stdout).not.to.include('no user yet');
    expect((await stopWith(again, 'SIGTERM')).code).to.equal(0);
  });

  it('when PORT is taken, the first and only error line says so, before the database starts', async () => {
    const holder = net.createServer();
    const port = await freePort();
    await new Promise<void>((resolve) => holder.listen(port, '127.0.0.1', resolve));
    try {
      const run = spawnProcess(process.execPath, serverNodeArgs(), { ...environment(), PORT: String(port), LOG_LEVEL: 'debug' });
      const { code } = await run.exited;
      expect(code, describeRun(run)).to.equal(1);
      const stderrLines = run.stderr.split('\n').filter((line) => line.trim() !== '');
      expect(stderrLines, describeRun(run)).to.deep.equal([
        `failed to start: port ${port} on 127.0.0.1 is already in use (PORT=${port}): stop what listens there or set PORT to another port`,
      ]);
      // Nothing ran before it: not a log line of any level, so no database was started.
      expect(run.stdout.trim(), describeRun(run)).to.equal('');
    } finally {
      await new Promise((resolve) => holder.close(resolve));
    }
  });

  describe('listeningUrl', () => {
    it('is the listen address, with localhost for a wildcard and brackets for IPv6', () => {
      expect(listeningUrl('127.0.0.1', 3000)).to.equal('http://127.0.0.1:3000');
      expect(listeningUrl('0.0.0.0', 8080)).to.equal('http://localhost:8080');
      expect(listeningUrl('::', 8080)).to.equal('http://localhost:8080');
      expect(listeningUrl('::1', 8080)).to.equal('http://[::1]:8080');
    });
  });

  describe('the embedded PostgreSQL of npm start', () => {
    it("listens by default below the kernel's ephemeral range, where no outgoing connection can hold its port", () => {
      const config = loadConfig({ DATA_DIR: '.data' });
      expect(config.database.kind).to.equal('embedded');
      const port = config.database.kind === 'embedded' ? config.database.port : NaN;
      expect(port).to.equal(DEFAULT_EMBEDDED_PG_PORT);
      // Linux's default range, and this machine's own when it says.
      const ranges: [number, number][] = [[32768, 60999]];
      try {
        const [low, high] = fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
        ranges.push([low!, high!]);
      } catch {
        // not Linux: the default range is checked
      }
      for (const [low, high] of ranges) expect(port < low || port > high, `${port} in ${low}-${high}`).to.equal(true);
      // Not a port a well-known service registers either (1024 and up: unprivileged; not PostgreSQL's own 5432).
      expect(port).to.be.above(1024).and.not.equal(5432);
    });
  });

  describe('firstSuperAdminCommand', () => {
    const base = {
      poolSize: 1,
      timeouts: { acquireTimeoutMs: 1, queryTimeoutMs: 1, readinessTimeoutMs: 1 },
      poolMode: 'session' as const,
      applicationName: 'agent-platform',
    };
    const plain = 'npm run admin -- create-user --email admin@example.com --super-admin';

    it('is the plain command on the default embedded database', () => {
      expect(firstSuperAdminCommand({ database: { kind: 'embedded', dataDir: `${PACKAGE_ROOT}/.data`, port: DEFAULT_EMBEDDED_PG_PORT, ...base } })).to.equal(plain);
    });

    it("names the port that was the default before (54329) and the new default's neighbours", () => {
      for (const port of [54329, DEFAULT_EMBEDDED_PG_PORT + 1]) {
        expect(firstSuperAdminCommand({ database: { kind: 'embedded', dataDir: `${PACKAGE_ROOT}/.data`, port, ...base } })).to.equal(`EMBEDDED_PG_PORT=${port} ${plain}`);
      }
    });

    it('names a data directory and port that differ from the defaults, quoted for the shell when needed', () => {
      expect(firstSuperAdminCommand({ database: { kind: 'embedded', dataDir: "/srv/it's here", port: 6000, ...base } })).to.equal(
        `DATA_DIR='/srv/it'\\''s here' EMBEDDED_PG_PORT=6000 ${plain}`,
      );
    });

    it('never repeats a DATABASE_URL (it holds a password)', () => {
      expect(firstSuperAdminCommand({ database: { kind: 'url', url: 'postgres://u:secret@db/x', listenUrl: 'postgres://u:secret@db/x', ...base } })).to.equal(plain);
    });
  });
});
