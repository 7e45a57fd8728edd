import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { isAlive } from '../../src/db/embedded-postgres.ts';
import { freePort } from '../../scripts/lib/free-port.ts';
import { testDatabase } from './hooks.ts';
import { captureLog } from './secret-scan.ts';
import { serverOutputReader } from './response-contract.ts';
import { serverNodeArgs } from '../../src/server-node-flags.ts';

/**
 * Real server processes for tests that need more than `supertest(app.callback())`: signals,
 * crashes, several instances on one database. Every process started here is tracked and killed by
 * `killAllProcesses()` (call it in `afterEach`), so a failing test leaves nothing running.
 */

export const ROOT = path.resolve(import.meta.dirname, '..', '..');

/** With DATABASE_URL set, servers share the test database; otherwise each data directory has its own embedded PostgreSQL. */
export const useEmbedded = !process.env.DATABASE_URL;

export { freePort };

/** Polls `condition` every 50 ms; false when it did not hold within `timeoutMs`. */
export async function waitFor(condition: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return true;
}

/**
 * A fresh data directory under `.data/` for a server's embedded PostgreSQL. Not mkdtemp (mode 0700):
 * as root the embedded PostgreSQL runs as the "postgres" user, which must be able to traverse it.
 */
export function createDataDir(label: string): string {
  const dataDir = path.join(ROOT, '.data', `${label}-${randomBytes(6).toString('hex')}`);
  fs.mkdirSync(dataDir, { recursive: true });
  fs.chmodSync(dataDir, 0o755);
  return dataDir;
}

/** The pid in the first line of the cluster's `postmaster.pid`, if the file exists. */
export function postmasterPid(dataDir: string): number | undefined {
  try {
    const pid = Number(fs.readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** Stops a PostgreSQL left running under `dataDir`: fast shutdown first, harder signals if it lingers. */
export async function stopLeftoverPostgres(dataDir: string): Promise<void> {
  const pid = postmasterPid(dataDir);
  if (!pid || !isAlive(pid)) return;
  for (const signal of ['SIGINT', 'SIGQUIT', 'SIGKILL'] as const) {
    try {
      process.kill(pid, signal);
    } catch {
      return;
    }
    if (await waitFor(() => !isAlive(pid), 10_000)) return;
  }
}

/**
 * The environment of a server or CLI process: the embedded PostgreSQL under `dataDir` on
 * `embeddedPgPort`, or, when the tests run on DATABASE_URL, the test database.
 */
export function serverEnvironment(
  database: { dataDir: string; embeddedPgPort: number },
  extra: NodeJS.ProcessEnv = {},
): NodeJS.ProcessEnv {
  // RESPONSE_VALIDATION: the process checks its responses against the spec; see spawnProcess.
  const env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: 'info', RESPONSE_VALIDATION: 'log', ...extra };
  if (useEmbedded) {
    delete env.DATABASE_URL;
    env.DATA_DIR = database.dataDir;
    env.EMBEDDED_PG_PORT = String(database.embeddedPgPort);
  } else {
    env.DATABASE_URL = testDatabase().url;
  }
  return env;
}

export interface RunningProcess {
  child: ChildProcess;
  stdout: string;
  stderr: string;
  /** Resolves with the exit code (or the signal that ended the process). */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const children = new Set<ChildProcess>();

/** Spawns `command args…` in the project root, collecting its output; tracked for `killAllProcesses`. */
export function spawnProcess(command: string, args: string[], env: NodeJS.ProcessEnv): RunningProcess {
  const child = spawn(command, args, { cwd: ROOT, env });
  children.add(child);
  const run: RunningProcess = {
    child,
    stdout: '',
    stderr: '',
    exited: new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        children.delete(child);
        resolve({ code, signal });
      });
    }),
  };
  child.stdout!.on('data', (chunk: Buffer) => (run.stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (run.stderr += chunk.toString()));
  // A response the spec does not describe fails the running test (test/helpers/response-contract.ts).
  const readViolations = serverOutputReader();
  child.stderr!.on('data', (chunk: Buffer) => readViolations(chunk.toString()));
  return run;
}

/** Spawns `node --import tsx <script> ...args` in the project root. */
export function spawnNode(script: string, args: string[], env: NodeJS.ProcessEnv): RunningProcess {
  return spawnProcess(process.execPath, ['--import', 'tsx', script, ...args], env);
}

/** SIGKILLs every process spawned here that is still running, and waits for each to exit. */
export async function killAllProcesses(): Promise<void> {
  await Promise.all(
    [...children].map(async (child) => {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    }),
  );
}

/** What a failing assertion should show about a process. */
export const describeRun = (run: RunningProcess) =>
  `stdout:\n${run.stdout.slice(-4000)}\nstderr:\n${run.stderr.slice(-4000)}`;

export interface ServerProcess extends RunningProcess {
  port: number;
  baseUrl: string;
  /** From spawning the process to the first 200 from /readyz. */
  startupMs: number;
}

/**
 * Starts a server on a free port and waits until /readyz answers 200, measuring how long that took.
 * `launch` spawns it given its environment; by default `node <SERVER_NODE_FLAGS> --import tsx src/main.ts`, as `npm start`.
 */
export async function startServerProcess(
  env: NodeJS.ProcessEnv,
  options: { readyWithinMs?: number; launch?: (env: NodeJS.ProcessEnv) => RunningProcess } = {},
): Promise<ServerProcess> {
  const readyWithinMs = options.readyWithinMs ?? 30_000;
  const port = await freePort();
  const started = Date.now();
  const launch = options.launch ?? ((e) => spawnProcess(process.execPath, serverNodeArgs(), e));
  const run = launch({ RESPONSE_VALIDATION: 'log', ...env, PORT: String(port) });
  const server: ServerProcess = Object.assign(run, { port, baseUrl: `http://127.0.0.1:${port}`, startupMs: 0 });
  // Server logs go to the end-of-run secret scan.
  run.child.stdout!.on('data', (chunk: Buffer) => captureLog('server process', chunk.toString()));
  run.child.stderr!.on('data', (chunk: Buffer) => captureLog('server process', chunk.toString()));
  let exitedEarly: { code: number | null } | undefined;
  void run.exited.then((result) => (exitedEarly = result));
  while (Date.now() - started < readyWithinMs) {
    if (exitedEarly) throw new Error(`the server exited with code ${exitedEarly.code} before it was ready\n${describeRun(run)}`);
    try {
      const response = await fetch(`${server.baseUrl}/readyz`);
      if (response.status === 200) {
        server.startupMs = Date.now() - started;
        return server;
      }
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`/readyz did not answer 200 within ${readyWithinMs} ms\n${describeRun(run)}`);
}

/** Sends `signal` and waits for the process to exit. */
export async function stopWith(run: RunningProcess, signal: NodeJS.Signals) {
  run.child.kill(signal);
  return run.exited;
}
