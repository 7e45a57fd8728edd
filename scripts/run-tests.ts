/**
 * `npm test [-- <files or globs> <mocha options>]`: the suite split into shards that run at once, each
 * a mocha of its own on a database of its own, balanced by how long each file took (test/timings.json).
 * One mocha keeps about 60 % of two cores busy (its tests wait for servers, browsers, PostgreSQL), so two
 * shards on two cores take about two thirds of its time. TEST_SHARDS sets their number (at most 4; 1 on a
 * single core).
 *
 * Shard 1 runs as `mocha` alone would (`.data/test`, port 25439, or DATABASE_URL's database); shard k
 * uses `.data/test-k` and port 25439 + 100·(k−1), or DATABASE_URL's database with `_shard<k>` (created
 * when missing); the servers tests start listen on ports of the shard's own range (TEST_PORTS). Shard 1
 * prints as it goes, the others once it is done; the last line sums them all up
 * (`run-tests: N passing, N pending, N failing (…)`, what CI reads), and the exit code is non-zero when
 * any shard failed.
 * SIGINT, SIGTERM or SIGHUP stop the shards (and so what their tests started); so does the death of
 * this process's parent; and each shard's reaper (test/helpers/run-reaper.ts) watches this process,
 * so even a SIGKILL here leaves nothing behind.
 * TEST_UPDATE_TIMINGS=1 writes the run's per-file times to test/timings.json.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { shardServerPorts, TEST_PG_PORT, TEST_RUNNER_PID_ENV } from './lib/test-runner-env.ts';
import { balance, DEFAULT_GLOB, splitArguments, totalsOf } from './lib/test-shards.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MOCHA = path.join(ROOT, 'node_modules', 'mocha', 'bin', 'mocha.js');
const TIMINGS = path.join(ROOT, 'test', 'timings.json');
const PORT_STEP = 100;
const MAX_SHARDS = 4;

interface Shard {
  index: number;
  files: string[];
  /** Seconds the files took last time (test/timings.json). */
  expected: number;
  env: NodeJS.ProcessEnv;
  timingsOut: string;
  output: string[];
  child?: ChildProcess;
  code?: number;
  seconds?: number;
}

function testFiles(patterns: string[]): string[] {
  const files = new Set<string>();
  for (const pattern of patterns) {
    for (const file of fs.globSync(pattern, { cwd: ROOT })) files.add(file.split(path.sep).join('/'));
  }
  return [...files].sort();
}

function readTimings(): Record<string, number> {
  try {
    return JSON.parse(fs.readFileSync(TIMINGS, 'utf8')) as Record<string, number>;
  } catch {
    return {};
  }
}

/** The database of shard `index` next to DATABASE_URL's, created when missing. */
async function shardDatabaseUrl(base: string, index: number): Promise<string> {
  const url = new URL(base);
  const name = `${decodeURIComponent(url.pathname.slice(1)) || 'postgres'}_shard${index}`;
  const client = new pg.Client({ connectionString: base });
  await client.connect();
  try {
    const { rowCount } = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (!rowCount) await client.query(`create database "${name.replaceAll('"', '""')}"`);
  } finally {
    await client.end();
  }
  url.pathname = `/${encodeURIComponent(name)}`;
  return url.toString();
}

async function shardEnvironment(index: number, timingsOut: string): Promise<NodeJS.ProcessEnv> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    [TEST_RUNNER_PID_ENV]: String(process.pid),
    TEST_TIMINGS_OUT: timingsOut,
    TEST_PORTS: shardServerPorts(index),
  };
  if (index === 1) return env;
  const port = Number(process.env.TEST_EMBEDDED_PG_PORT ?? TEST_PG_PORT) + PORT_STEP * (index - 1);
  env.TEST_DATA_DIR = `${process.env.TEST_DATA_DIR ?? '.data/test'}-${index}`;
  env.TEST_EMBEDDED_PG_PORT = String(port);
  if (process.env.DATABASE_URL) env.DATABASE_URL = await shardDatabaseUrl(process.env.DATABASE_URL, index);
  return env;
}

let stopping = false;

/** SIGINT to each mocha launcher (it passes it on to its tests' process, which stops what they started). */
function stopOnSignals(children: ChildProcess[]): void {
  const stop = (reason: string) => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`\nrun-tests: ${reason}; stopping the shards\n`);
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
  };
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => stop(signal));
  const parent = process.ppid;
  // Orphaned (npm killed), this process is re-parented: its tests have nobody left to report to.
  setInterval(() => process.ppid !== parent && stop('the parent process is gone'), 1000).unref();
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const { patterns, options } = splitArguments(args);
  const files = testFiles(patterns);
  const wanted = Number(process.env.TEST_SHARDS ?? Math.min(2, os.availableParallelism()));
  const count = Math.max(1, Math.min(Number.isInteger(wanted) ? wanted : 1, files.length, MAX_SHARDS));
  const started = performance.now();
  const timingsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'run-tests-'));
  const timings = readTimings();
  const shards: Shard[] = [];
  for (const [i, planned] of balance(files, count, timings).entries()) {
    const timingsOut = path.join(timingsDir, `shard-${i + 1}.json`);
    shards.push({ index: i + 1, ...planned, timingsOut, env: await shardEnvironment(i + 1, timingsOut), output: [] });
  }
  process.stdout.write(
    count === 1
      ? `run-tests: ${files.length} files in one mocha\n`
      : `run-tests: ${files.length} files in ${count} shards at once (${shards.map((s) => `${s.files.length} files, ~${Math.round(s.expected)} s`).join('; ')}); shard 1 prints as it goes, the others after it\n`,
  );

  const color = process.stdout.isTTY ? ['--color'] : [];
  const finished = shards.map(
    (shard) =>
      new Promise<void>((resolve) => {
        const shardStarted = performance.now();
        const child = spawn(process.execPath, [MOCHA, ...color, ...options, ...shard.files], { cwd: ROOT, env: shard.env, stdio: ['ignore', 'pipe', 'pipe'] });
        shard.child = child;
        const take = (chunk: Buffer) => {
          shard.output.push(chunk.toString());
          if (shard.index === 1) process.stdout.write(chunk);
        };
        child.stdout.on('data', take);
        child.stderr.on('data', take);
        child.on('close', (code, signal) => {
          shard.code = code ?? 128 + (signal ? os.constants.signals[signal] : 1);
          shard.seconds = (performance.now() - shardStarted) / 1000;
          resolve();
        });
      }),
  );
  stopOnSignals(shards.map((shard) => shard.child!));

  await finished[0];
  for (const [i, shard] of shards.entries()) {
    if (i === 0) continue;
    await finished[i];
    process.stdout.write(`\n── shard ${shard.index} of ${count} (${shard.files.length} files, ${shard.env.DATABASE_URL ? 'database ' + new URL(shard.env.DATABASE_URL).pathname.slice(1) : shard.env.TEST_DATA_DIR}) ──\n`);
    process.stdout.write(shard.output.join(''));
  }

  const totals = { passing: 0, pending: 0, failing: 0 };
  const shardsWord = count === 1 ? '1 shard' : `${count} shards`;
  process.stdout.write(`\n── ${shardsWord} ──\n`);
  for (const shard of shards) {
    const shardTotals = totalsOf(shard.output.join(''));
    if (shardTotals) for (const key of ['passing', 'pending', 'failing'] as const) totals[key] += shardTotals[key];
    // A shard that died before its summary is a failure of its own.
    else totals.failing += 1;
    process.stdout.write(
      `shard ${shard.index}: ${shard.files.length} files, ${Math.round(shard.seconds!)} s (expected ~${Math.round(shard.expected)} s), exit ${shard.code}${shardTotals ? '' : ', no summary'}\n`,
    );
  }
  recordTimings(shards);
  fs.rmSync(timingsDir, { recursive: true, force: true });
  const seconds = Math.round((performance.now() - started) / 1000);
  // The last line, which CI reads (.ci/run): a run without it did not finish.
  process.stdout.write(`\nrun-tests: ${totals.passing} passing, ${totals.pending} pending, ${totals.failing} failing (${shardsWord}, ${seconds} s)\n`);
  // Not process.exit: into a pipe, what is still being written would be cut off.
  process.exitCode = shards.some((shard) => shard.code !== 0) || totals.failing > 0 ? 1 : 0;
}

/** With TEST_UPDATE_TIMINGS=1, this run's seconds per file replace those of test/timings.json. */
function recordTimings(shards: Shard[]): void {
  if (process.env.TEST_UPDATE_TIMINGS !== '1') return;
  const merged = readTimings();
  for (const shard of shards) {
    try {
      for (const [file, seconds] of Object.entries(JSON.parse(fs.readFileSync(shard.timingsOut, 'utf8')) as Record<string, number>)) merged[file] = seconds;
    } catch {
      // a shard that wrote nothing keeps its files' earlier times
    }
  }
  const sorted = Object.fromEntries(Object.entries(merged).sort(([a], [b]) => a.localeCompare(b)).map(([file, seconds]) => [file, Math.round(seconds * 10) / 10]));
  fs.writeFileSync(TIMINGS, `${JSON.stringify(sorted, null, 2)}\n`);
  process.stdout.write(`run-tests: wrote ${path.relative(ROOT, TIMINGS)}\n`);
}

await main();
