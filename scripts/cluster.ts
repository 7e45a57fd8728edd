/**
 * `npm run cluster`: PostgreSQL (the embedded one, or DATABASE_URL's), PgBouncer in transaction
 * pooling mode in front of it, and CLUSTER_INSTANCES server instances on consecutive ports from
 * CLUSTER_PORT, each reaching the database through PgBouncer and LISTENing straight on PostgreSQL
 * (DATABASE_LISTEN_URL). An instance that dies is started again; Ctrl-C or SIGTERM stops the
 * instances, then PgBouncer, then the embedded PostgreSQL, and leaves nothing running.
 * CLUSTER_DELIVERY_INSTANCES more instances deliver the outbound webhooks at a lower CPU priority, the
 * others then not at all. See docs/scaling.md.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setPriority, userInfo } from 'node:os';
import { createLogger } from '../src/logger.ts';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/db/embedded-postgres.ts';
import { serverNodeArgs } from '../src/server-node-flags.ts';
import { DELIVERY_INSTANCE_ENV, WEBHOOK_INSTANCE_ENV } from './lib/delivery-instance.ts';

const ROOT = path.resolve(import.meta.dirname, '..');

function integer(name: string, fallback: number, min: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    console.error(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
    process.exit(2);
  }
  return value;
}

const instances = integer('CLUSTER_INSTANCES', 2, 1, 64);
const deliveryInstances = integer('CLUSTER_DELIVERY_INSTANCES', 0, 0, 8);
const firstPort = integer('CLUSTER_PORT', 3000, 1024, 65535 - instances - deliveryInstances);
const poolSize = integer('CLUSTER_POOL_SIZE', 10, 1, 1000);
const pgbouncerPort = integer('CLUSTER_PGBOUNCER_PORT', 6433, 1024, 65535);
const embeddedPort = integer('CLUSTER_EMBEDDED_PG_PORT', 54359, 1024, 65535);
const queryTimeoutMs = integer('DB_QUERY_TIMEOUT_MS', 30_000, 100, 3_600_000);
const shutdownGraceMs = integer('SHUTDOWN_GRACE_MS', 10_000, 0, 600_000);
const dataDir = path.resolve(process.env.CLUSTER_DATA_DIR || path.join(ROOT, '.data', 'cluster'));
const host = '127.0.0.1';
/**
 * The delivery instances' niceness: on cores they share with the webhook's instances, the kernel gives
 * the webhook the CPU first and delivery what is left (docs/scaling.md, "A delivery instance").
 */
const DELIVERY_NICE = 10;

/** PgBouncer's binary: PGBOUNCER, the PATH, or Debian's /usr/sbin (not on a normal user's PATH). */
function findPgbouncer(): string | undefined {
  const candidates = process.env.PGBOUNCER
    ? [process.env.PGBOUNCER]
    : [...(process.env.PATH ?? '').split(':').filter(Boolean), '/usr/sbin', '/usr/local/sbin', '/sbin'].map((dir) => path.join(dir, 'pgbouncer'));
  return candidates.find((file) => {
    try {
      fs.accessSync(file, fs.constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** A URL without its password, for printing. */
function shown(url: string): string {
  const u = new URL(url);
  if (u.password) u.password = '***';
  return u.href;
}

/** The pgbouncer.ini and userlist for a transaction-pooling PgBouncer in front of `directUrl`. */
function pgbouncerFiles(directUrl: string): { ini: string; userlist: string; database: string; user: string; password: string } {
  const u = new URL(directUrl);
  const database = decodeURIComponent(u.pathname.slice(1)) || 'postgres';
  const user = decodeURIComponent(u.username) || userInfo().username;
  const password = decodeURIComponent(u.password);
  const quote = (s: string) => `"${s.replaceAll('"', '""')}"`;
  const ini = [
    '[databases]',
    // connect_query gives every server connection our statement_timeout: behind a transaction pooler
    // the client cannot (PgBouncer refuses it as a startup parameter, and a SET would leak to other clients).
    `${database} = host=${u.hostname.replace(/^\[|\]$/g, '')} port=${u.port || 5432} dbname=${database} connect_query='SET statement_timeout = ${queryTimeoutMs}'`,
    '',
    '[pgbouncer]',
    `listen_addr = ${host}`,
    `listen_port = ${pgbouncerPort}`,
    'unix_socket_dir =',
    // Matching PostgreSQL's authentication: with a password PgBouncer checks it (SCRAM) and logs in with it.
    `auth_type = ${password ? 'scram-sha-256' : 'trust'}`,
    `auth_file = ${path.join(dataDir, 'pgbouncer', 'userlist.txt')}`,
    'pool_mode = transaction',
    `default_pool_size = ${poolSize}`,
    `max_db_connections = ${poolSize}`,
    'max_client_conn = 2000',
    `logfile = ${path.join(dataDir, 'pgbouncer', 'pgbouncer.log')}`,
    '',
  ].join('\n');
  return { ini, userlist: `${quote(user)} ${quote(password)}\n`, database, user, password };
}

/** Root may not run PgBouncer: it then runs as the `postgres` user the embedded PostgreSQL uses too. */
function runAsUser(): string | undefined {
  if (userInfo().uid !== 0) return undefined;
  if (spawnSync('id', ['-u', 'postgres']).status !== 0) {
    spawnSync('groupadd', ['--system', 'postgres']);
    spawnSync('useradd', ['--system', '--gid', 'postgres', '--no-create-home', 'postgres']);
  }
  return 'postgres';
}

async function waitUntil(condition: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return true;
}

async function ready(port: number): Promise<boolean> {
  try {
    const response = await fetch(`http://${host}:${port}/readyz`, { signal: AbortSignal.timeout(1_000) });
    return response.status === 200;
  } catch {
    return false;
  }
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone. */
async function stopChild(child: ChildProcess, graceMs: number): Promise<void> {
  const gone = exited(child);
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await gone;
  clearTimeout(timer);
}

let stopping = false;
let embedded: EmbeddedPostgres | undefined;
let bouncer: ChildProcess | undefined;
const servers: (ChildProcess | undefined)[] = new Array(instances + deliveryInstances).fill(undefined);

/** Stops the instances, then PgBouncer, then the embedded PostgreSQL, and exits with `code`. */
async function shutdown(code: number): Promise<void> {
  stopping = true;
  await Promise.all(servers.map((child) => child && stopChild(child, shutdownGraceMs + 5_000)));
  if (bouncer) await stopChild(bouncer, 5_000);
  await embedded?.stop();
  console.log('cluster stopped');
  process.exit(code);
}

async function main(): Promise<void> {
  const pgbouncer = findPgbouncer();
  if (!pgbouncer) {
    console.error('pgbouncer is not installed (Debian: apt-get install pgbouncer; or set PGBOUNCER to its path)');
    process.exit(2);
  }
  fs.mkdirSync(path.join(dataDir, 'pgbouncer'), { recursive: true });
  // The embedded PostgreSQL and PgBouncer may run as another user (as root), who must traverse it.
  fs.chmodSync(dataDir, 0o755);

  let stopRequested: (() => void) | undefined;
  const stopSignal = new Promise<void>((resolve) => (stopRequested = resolve));
  const onSignal = (signal: NodeJS.Signals) => {
    if (!stopping) console.log(`${signal}: stopping the cluster`);
    stopping = true;
    stopRequested?.();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  // 1. PostgreSQL
  let directUrl = process.env.DATABASE_URL?.trim();
  if (directUrl) {
    console.log(`postgres   ${shown(directUrl)} (DATABASE_URL)`);
  } else {
    embedded = await startEmbeddedPostgres({ dataDir, port: embeddedPort }, createLogger('warn'));
    directUrl = embedded.url;
    console.log(`postgres   ${shown(directUrl)} (embedded, data in ${path.join(dataDir, 'pg')})`);
  }
  if (stopping) return shutdown(0);

  // 2. PgBouncer, in the foreground as our child (its own process group: Ctrl-C reaches only us, and we stop it after the instances)
  const files = pgbouncerFiles(directUrl);
  const ini = path.join(dataDir, 'pgbouncer', 'pgbouncer.ini');
  const userlist = path.join(dataDir, 'pgbouncer', 'userlist.txt');
  fs.writeFileSync(ini, files.ini, { mode: 0o600 });
  fs.writeFileSync(userlist, files.userlist, { mode: 0o600 });
  fs.writeFileSync(path.join(dataDir, 'pgbouncer', 'pgbouncer.log'), '', { mode: 0o600 });
  const user = runAsUser();
  if (user) {
    const uid = Number(spawnSync('id', ['-u', user], { encoding: 'utf8' }).stdout.trim());
    const gid = Number(spawnSync('id', ['-g', user], { encoding: 'utf8' }).stdout.trim());
    for (const file of [path.join(dataDir, 'pgbouncer'), ini, userlist, path.join(dataDir, 'pgbouncer', 'pgbouncer.log')]) fs.chownSync(file, uid, gid);
  }
  bouncer = spawn(pgbouncer, [...(user ? ['-u', user] : []), ini], { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  let bouncerErrors = '';
  bouncer.stderr!.on('data', (chunk: Buffer) => (bouncerErrors += chunk.toString()));
  bouncer.once('exit', (code, signal) => {
    if (stopping) return;
    console.error(`pgbouncer exited (${signal ?? code}): ${bouncerErrors.trim()}; see ${path.join(dataDir, 'pgbouncer', 'pgbouncer.log')}`);
    void shutdown(1);
  });
  const bouncerUp = await waitUntil(
    async () => fs.readFileSync(path.join(dataDir, 'pgbouncer', 'pgbouncer.log'), 'utf8').includes('process up') || bouncer!.exitCode !== null,
    10_000,
  );
  if (!bouncerUp || bouncer.exitCode !== null) {
    console.error('pgbouncer did not start');
    return shutdown(1);
  }
  const pooled = new URL(directUrl);
  pooled.hostname = host;
  pooled.port = String(pgbouncerPort);
  const pooledUrl = pooled.href;
  console.log(`pgbouncer  ${shown(pooledUrl)} (transaction pooling, ${poolSize} server connections) pid ${bouncer.pid}`);

  // 3. The instances
  const instanceEnv = (port: number, delivers: boolean): NodeJS.ProcessEnv => {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      DATABASE_URL: pooledUrl,
      DATABASE_LISTEN_URL: directUrl,
      DATABASE_POOL_MODE: 'transaction',
      PORT: String(port),
      HOST: host,
      // Shared by every instance: the secrets' encryption key file lives here.
      DATA_DIR: path.join(dataDir, 'instances'),
      LOG_LEVEL: process.env.LOG_LEVEL || 'info',
    };
    delete env.EMBEDDED_PG_PORT;
    if (deliveryInstances > 0) Object.assign(env, delivers ? DELIVERY_INSTANCE_ENV : WEBHOOK_INSTANCE_ENV);
    return env;
  };
  const start = async (index: number): Promise<boolean> => {
    const port = firstPort + index;
    const delivers = index >= instances;
    const log = fs.openSync(path.join(dataDir, `instance-${index + 1}.log`), 'a');
    const child = spawn(process.execPath, serverNodeArgs(path.join(ROOT, 'src', 'main.ts')), {
      cwd: ROOT,
      env: instanceEnv(port, delivers),
      stdio: ['ignore', log, log],
      detached: true,
    });
    fs.closeSync(log);
    if (delivers && child.pid !== undefined) {
      try {
        setPriority(child.pid, DELIVERY_NICE);
      } catch (error) {
        console.error(`instance ${index + 1}: its priority could not be lowered (${error instanceof Error ? error.message : String(error)}); it delivers at the normal one`);
      }
    }
    servers[index] = child;
    let wasReady = false;
    child.once('exit', (code, signal) => {
      if (servers[index] === child) servers[index] = undefined;
      if (stopping) return;
      if (!wasReady) return; // start-up failure: reported by the caller
      console.log(`instance ${index + 1} exited (${signal ?? `code ${code}`}): starting it again`);
      setTimeout(() => {
        if (stopping) return;
        void start(index).then((ok) => {
          if (!ok && !stopping) void shutdown(1);
        });
      }, 200);
    });
    const up = await waitUntil(async () => stopping || child.exitCode !== null || child.signalCode !== null || (await ready(port)), 60_000);
    if (stopping) return true;
    if (!up || child.exitCode !== null || child.signalCode !== null) {
      if (!stopping) console.error(`instance ${index + 1} did not start; see ${path.join(dataDir, `instance-${index + 1}.log`)}`);
      return stopping;
    }
    wasReady = true;
    console.log(`instance ${index + 1} http://${host}:${port} pid ${child.pid}${delivers ? ` (delivers outbound webhooks, nice ${DELIVERY_NICE})` : ''}`);
    return true;
  };
  // The first instance migrates (and installs the job queue's schema) alone; the others then find it done.
  const first = await start(0);
  const started = [first, ...(first ? await Promise.all(Array.from({ length: servers.length - 1 }, (_, i) => start(i + 1))) : [])];
  if (stopping) return shutdown(0);
  if (started.includes(false)) return shutdown(1);
  const delivery = deliveryInstances > 0 ? ` and ${deliveryInstances} delivering outbound webhooks` : '';
  console.log(`cluster ready: ${instances} instances${delivery}, logs in ${dataDir}; Ctrl-C stops them all`);
  await stopSignal;
  return shutdown(0);
}

main().catch((error: unknown) => {
  console.error(`cluster failed: ${error instanceof Error ? error.message : String(error)}`);
  void shutdown(1);
});
