/**
 * Start-up time and resident memory of the two ways to run the server: `npm start` (TypeScript
 * through tsx) and `npm run start:prod` (the compiled `dist/`, plain node). Prints a Markdown table.
 *
 *   npm run build && npm run measure:start          # MEASURE_RUNS=5 by default
 *
 * Both commands run against one PostgreSQL the script starts itself (embedded, under
 * .data/measure) and pass as DATABASE_URL, so the figures are the Node.js process's own: loading
 * the code, compiling the contract's validators, connecting, checking migrations. Start-up is from
 * spawning the command to the first 200 from /readyz; memory is the resident set (VmRSS) of every
 * process the command keeps running (npm, sh, the tsx wrapper, the server; not PostgreSQL), read
 * once ready and again after 2,000 requests.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { freePort } from './lib/free-port.ts';
import { parentOf } from './lib/process-scan.ts';
import path from 'node:path';
import { startEmbeddedPostgres } from '../src/db/embedded-postgres.ts';
import { createLogger } from '../src/logger.ts';
import { PACKAGE_ROOT } from '../src/package-root.ts';

const RUNS = Number(process.env.MEASURE_RUNS ?? 5);
const REQUESTS = 2_000;
const COMMANDS: { label: string; args: string[] }[] = [
  { label: '`npm start` (tsx)', args: ['start'] },
  { label: '`npm run start:prod` (node dist/)', args: ['run', 'start:prod'] },
];

/** The pids of `root` and all its descendants, from /proc. */
function processTree(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const ppid = parentOf(Number(entry));
    if (ppid === undefined) continue; // the process ended meanwhile
    if (!children.has(ppid)) children.set(ppid, []);
    children.get(ppid)!.push(Number(entry));
  }
  const tree: number[] = [];
  const pending = [root];
  while (pending.length > 0) {
    const pid = pending.pop()!;
    tree.push(pid);
    pending.push(...(children.get(pid) ?? []));
  }
  return tree;
}

/** VmRSS in MiB of the command's processes (PostgreSQL excluded), and of the server process alone. */
function residentMemory(root: number): { total: number; server: number } {
  let total = 0;
  let server = 0;
  for (const pid of processTree(root)) {
    try {
      const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
      const name = /^Name:\s+(\S+)/m.exec(status)?.[1] ?? '';
      if (name.startsWith('postgres')) continue;
      const kib = Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? 0);
      total += kib;
      const commandLine = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (/src\/main\.(ts|js)/.test(commandLine) && kib / 1024 > server) server = kib / 1024;
    } catch {
      // the process ended meanwhile
    }
  }
  return { total: total / 1024, server };
}

/** True while `pid` exists and is not a zombie. */
function running(pid: number): boolean {
  try {
    return !/^State:\s+Z/m.test(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}

async function untilReady(url: string, child: ChildProcess, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`the server exited with ${child.exitCode}`);
    try {
      if ((await fetch(`${url}/readyz`)).status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error('not ready in time');
}

async function traffic(url: string): Promise<void> {
  const paths = ['/readyz', '/healthz', '/openapi.yaml', '/api/v1/conversations'];
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < REQUESTS) {
        const response = await fetch(`${url}${paths[next++ % paths.length]}`);
        await response.arrayBuffer();
      }
    }),
  );
}

interface Run {
  startupMs: number;
  rssReady: { total: number; server: number };
  rssAfter: { total: number; server: number };
}

async function measure(args: string[], databaseUrl: string): Promise<Run> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const started = performance.now();
  const child = spawn('npm', ['--silent', ...args], {
    cwd: PACKAGE_ROOT,
    env: { ...process.env, DATABASE_URL: databaseUrl, PORT: String(port), LOG_LEVEL: 'warn', NODE_OPTIONS: '' },
    stdio: ['ignore', 'ignore', 'inherit'],
    // Its own process group: the stop below signals npm, sh, tsx and the server alike, whatever
    // each of them does (or does not do) about passing signals on.
    detached: true,
  });
  try {
    await untilReady(url, child);
    const startupMs = performance.now() - started;
    await new Promise((resolve) => setTimeout(resolve, 500));
    const rssReady = residentMemory(child.pid!);
    await traffic(url);
    const rssAfter = residentMemory(child.pid!);
    return { startupMs, rssReady, rssAfter };
  } finally {
    const tree = processTree(child.pid!);
    process.kill(-child.pid!, 'SIGTERM');
    // Wait for the server itself, not only npm: the next run must find the database pool released.
    while (tree.some(running)) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const range = (values: number[], digits = 0) =>
  `${median(values).toFixed(digits)} (${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)})`;

async function main(): Promise<void> {
  if (!fs.existsSync(path.join(PACKAGE_ROOT, 'dist', 'src', 'main.js'))) {
    throw new Error('dist/src/main.js is missing: run npm run build first');
  }
  const dataDir = path.join(PACKAGE_ROOT, '.data', 'measure');
  fs.mkdirSync(dataDir, { recursive: true });
  fs.chmodSync(dataDir, 0o755);
  const postgres = await startEmbeddedPostgres(
    { dataDir, port: Number(process.env.MEASURE_PG_PORT ?? (await freePort())) },
    createLogger('warn'),
  );
  try {
    // One start to apply the migrations, so every measured start finds the schema up to date.
    await measure(['run', 'start:prod'], postgres.url);
    const rows: string[] = [];
    for (const { label, args } of COMMANDS) {
      const runs: Run[] = [];
      for (let i = 0; i < RUNS; i++) runs.push(await measure(args, postgres.url));
      rows.push(
        `| ${label} | ${range(runs.map((r) => r.startupMs))} | ${range(runs.map((r) => r.rssReady.server))} | ` +
          `${range(runs.map((r) => r.rssReady.total))} | ${range(runs.map((r) => r.rssAfter.server))} |`,
      );
    }
    console.log(`\n${RUNS} runs each, median (min–max); Node ${process.version}\n`);
    console.log('| command | start-up to /readyz 200, ms | server RSS when ready, MiB | RSS of all its processes, MiB | server RSS after 2,000 requests, MiB |');
    console.log('|---|---:|---:|---:|---:|');
    for (const row of rows) console.log(row);
  } finally {
    await postgres.stop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
