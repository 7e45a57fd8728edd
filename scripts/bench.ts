/**
 * Webhook benchmark, as issue 11 measures it: the shared bench kit's `run-all.sh` against this
 * server, next to the kit's Fastify peer and its raw-insert ceiling, all in one run on one database.
 * Prints a Markdown block (command, date, environment, table, ratios) to paste into docs/performance.md.
 *
 *   npm run bench                                   # embedded PostgreSQL under .data/bench
 *   DATABASE_URL=postgres://… npm run bench         # a PostgreSQL of your own (tables peer_*, ceil_* are added)
 *   BENCH_KIT=/path/to/bench BENCH_SECONDS=10 BENCH_BATCHES="1 5 100" npm run bench
 *
 * The kit lives in `../shared/bench` unless BENCH_KIT says otherwise; its knobs (BENCH_SECONDS,
 * BENCH_BATCHES, BENCH_CONNECTIONS, BENCH_CONCURRENCY, BENCH_SELFTEST) pass through. The server runs
 * with the environment's settings (INGEST_*, DB_POOL_SIZE, …) and LOG_LEVEL=warn.
 *
 * Then, on the same server, the open-loop check of the issue: BENCH_OPEN_LOOP_RUNS (3) runs of the
 * kit's paced load at BENCH_OPEN_LOOP_RATE requests/s (1000; 0 skips it) of batch 5, each warmed by
 * 3 s of the same load, reporting served rate, p50, p99 and anything but a 2xx.
 * BENCH_WEBHOOK_ENDPOINTS=10 measures the same with ten outbound endpoints subscribed (issue 21).
 * BENCH_DELIVERY_INSTANCE=<nice> delivers from a second instance at that scheduling priority (0–19), the
 * loaded one running with `OUTBOUND_WEBHOOK_WORKER=false` (as in `npm run bench:delivery`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { freePort } from './lib/free-port.ts';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AbstractSqlConnection } from '@mikro-orm/postgresql';
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/db/database.ts';
import { createLogger } from '../src/logger.ts';
import { generateSecret, hashSecret } from '../src/identity/secrets.ts';
import { serverNodeArgs } from '../src/server-node-flags.ts';
import { stopChild } from './lib/stop-child.ts';
import { benchDeliveryNice, DELIVERY_INSTANCE_ENV, WEBHOOK_INSTANCE_ENV } from './lib/delivery-instance.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const KIT = path.resolve(ROOT, process.env.BENCH_KIT ?? '../shared/bench');
const backgroundNice = benchDeliveryNice();

async function waitForReady(url: string): Promise<void> {
  for (let attempt = 0; attempt < 300; attempt++) {
    try {
      if ((await fetch(`${url}/readyz`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the server did not become ready');
}

interface OpenLoopRun {
  requests_per_s: number;
  p50_ms: number;
  p99_ms: number;
  non2xx: number;
  errors: number;
}

/** One run of the kit's load generator (`load.mjs` with `args`): the JSON line it prints. */
async function runLoad<T>(args: string[]): Promise<T> {
  const child = spawn(process.execPath, [path.join(KIT, 'load.mjs'), ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`load.mjs ${args.join(' ')} exited with ${code}`);
  return JSON.parse(output.trim().split('\n').at(-1)!) as T;
}

/** One paced run of the kit's load generator (open loop: latency counts from the planned send time). */
function runOpenLoop(serverUrl: string, sessionKey: string, rate: number, seconds: string): Promise<OpenLoopRun> {
  return runLoad<OpenLoopRun>([serverUrl, sessionKey, '--rate', String(rate), '--batch', '5', '--seconds', seconds, '--warmup', '3']);
}

/** Runs the kit; its progress goes to our standard error, its table comes back. */
async function runKit(databaseUrl: string, serverUrl: string, sessionKey: string): Promise<{ table: string; notes: string[] }> {
  const child = spawn('bash', [path.join(KIT, 'run-all.sh'), ROOT, databaseUrl, serverUrl, sessionKey], {
    env: process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let table = '';
  let errors = '';
  child.stdout.on('data', (chunk: Buffer) => (table += chunk));
  child.stderr.on('data', (chunk: Buffer) => {
    errors += chunk;
    process.stderr.write(chunk);
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`run-all.sh exited with ${code}`);
  // The environment line: PostgreSQL version, synchronous_commit, node, cpus, seconds per run.
  const notes = errors
    .split('\n')
    .filter((line) => line.startsWith('# PostgreSQL'))
    .map((line) => line.slice(2));
  return { table: table.trim(), notes };
}

/**
 * BENCH_WEBHOOK_ENDPOINTS=N: N outbound endpoints subscribed to `conversation.events` for the bench user,
 * delivering to a local sink (scripts/webhook-bench-endpoints.ts, stopped and its endpoints deleted afterwards).
 */
async function subscribeEndpoints(databaseUrl: string, email: string, count: number): Promise<ChildProcess | undefined> {
  if (count <= 0) return undefined;
  const args = ['--import', 'tsx', 'scripts/webhook-bench-endpoints.ts', '--email', email, '--count', String(count), '--sink-port', String(await freePort())];
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, DATABASE_URL: databaseUrl }, stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      if (String(chunk).includes('"endpoints"')) resolve();
      process.stderr.write(`# endpoints: ${chunk}`);
    });
    child.once('exit', (code) => reject(new Error(`webhook-bench-endpoints exited with ${code}`)));
  });
  return child;
}

/** The project's and the peer's events/s per batch, read from the kit's table. */
function eventsPerSecond(table: string): Map<number, { project?: number; peer?: number }> {
  const rows = new Map<number, { project?: number; peer?: number }>();
  for (const line of table.split('\n')) {
    const cells = line.split('|').map((cell) => cell.trim());
    const [batch, who, , events] = cells.slice(1);
    if (!batch || !/^\d+$/.test(batch) || (who !== 'project' && who !== 'peer') || !/^[\d.]+$/.test(events ?? '')) continue;
    rows.set(Number(batch), { ...rows.get(Number(batch)), [who]: Number(events) });
  }
  return rows;
}

function printComparison(count: number, without: string, withEndpoints: string, drain: Drain): void {
  const a = eventsPerSecond(without);
  const b = eventsPerSecond(withEndpoints);
  const ratio = (x?: number, y?: number) => (x && y ? (x / y).toFixed(2) : 'n/a');
  console.log(`\nThe same server, run again with ${count} outbound endpoints subscribed to \`conversation.events\` (a local sink answering 204):\n`);
  console.log(withEndpoints.split(/\n\s*\n/)[0]);
  console.log('\n| batch | events/s without | events/s with | with / without | ×peer without | ×peer with |');
  console.log('|------:|-----------------:|--------------:|---------------:|--------------:|-----------:|');
  for (const [batch, before] of a) {
    const after = b.get(batch) ?? {};
    console.log(
      `| ${batch} | ${before.project ?? 'n/a'} | ${after.project ?? 'n/a'} | ${ratio(after.project, before.project)} | ${ratio(before.project, before.peer)} | ${ratio(after.project, after.peer)} |`,
    );
  }
  console.log(
    `\nDeliveries: ${drain.messages} messages to ${drain.deliveries} deliveries; at the end of the kit's run at least ${drain.pendingAtEnd} were not delivered yet, ` +
      `then ${drain.drained} were delivered in ${drain.seconds.toFixed(1)} s (${Math.round(drain.drained / Math.max(drain.seconds, 0.001))}/s, no ingestion)` +
      `${drain.pendingAfter > 0 ? `, ${drain.pendingAfter} still pending when the bench stopped waiting` : ''}.`,
  );
}

interface AlternatedRound {
  batch: number;
  round: number;
  without: number;
  with: number;
}

/**
 * The project alone, with and without the endpoints, slice by slice (BENCH_ALTERNATE_ROUNDS rounds of
 * BENCH_ALTERNATE_SECONDS each way per batch, ABBA order): on a machine whose disk and neighbours make
 * two runs minutes apart differ by more than the 10 % to be shown, slices seconds apart agree.
 * Without = the endpoints disabled (the triggers then store no message).
 */
async function alternate(connection: AbstractSqlConnection, ownerId: string, serverUrl: string, sessionKey: string): Promise<AlternatedRound[]> {
  const rounds = Number(process.env.BENCH_ALTERNATE_ROUNDS ?? 4);
  const seconds = process.env.BENCH_ALTERNATE_SECONDS ?? '5';
  const batches = (process.env.BENCH_BATCHES ?? '1 5 100').split(/\s+/).filter(Boolean).map(Number);
  const slice = async (batch: number, enabled: boolean): Promise<number> => {
    await connection.execute('update webhook_endpoints set disabled = ? where owner_id = ?', [!enabled, ownerId]);
    const run = await runLoad<{ events_per_s: number }>([serverUrl, sessionKey, '--batch', String(batch), '--seconds', seconds]);
    return run.events_per_s;
  };
  const results: AlternatedRound[] = [];
  for (const batch of batches) {
    for (let round = 1; round <= rounds; round++) {
      process.stderr.write(`alternating, batch ${batch}, round ${round}/${rounds}\n`);
      const withFirst = round % 2 === 0;
      const first = await slice(batch, withFirst);
      const second = await slice(batch, !withFirst);
      results.push({ batch, round, without: withFirst ? second : first, with: withFirst ? first : second });
    }
  }
  await connection.execute('update webhook_endpoints set disabled = false where owner_id = ?', [ownerId]);
  return results;
}

function printAlternated(count: number, rounds: AlternatedRound[]): void {
  const median = (values: number[]) => {
    const sorted = [...values].sort((a, b) => a - b);
    const middle = Math.floor(sorted.length / 2);
    return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
  };
  console.log(`\nAlternating slices on the same server (the kit's \`load.mjs\`, ${process.env.BENCH_ALTERNATE_SECONDS ?? 5} s each, ABBA order), ${count} endpoints enabled or disabled:\n`);
  console.log('| batch | events/s without (each round) | events/s with (each round) | with / without per round | median |');
  console.log('|------:|---|---|---|---:|');
  for (const batch of [...new Set(rounds.map((r) => r.batch))]) {
    const mine = rounds.filter((r) => r.batch === batch);
    const ratios = mine.map((r) => r.with / r.without);
    console.log(
      `| ${batch} | ${mine.map((r) => Math.round(r.without)).join(', ')} | ${mine.map((r) => Math.round(r.with)).join(', ')} | ` +
        `${ratios.map((r) => r.toFixed(2)).join(', ')} | **${median(ratios).toFixed(2)}** |`,
    );
  }
}

interface Drain {
  messages: number;
  deliveries: number;
  pendingAtEnd: number;
  drained: number;
  pendingAfter: number;
  seconds: number;
}

/** Waits (up to BENCH_DRAIN_SECONDS, 120) until every message of the bench user is delivered: the delivery rate without ingestion. */
async function waitForDeliveries(connection: AbstractSqlConnection, ownerId: string): Promise<Drain> {
  const limitMs = Number(process.env.BENCH_DRAIN_SECONDS ?? 120) * 1000;
  const count = async () => {
    const [row] = await connection.execute<{ messages: number; deliveries: number; pending: number }[]>(
      `select (select count(*) from webhook_messages where owner_id = ?)::integer as messages,
              (select count(*) from webhook_deliveries d join webhook_messages m on m.id = d.message_id where m.owner_id = ?)::integer as deliveries,
              (select (select count(*) from webhook_endpoints e where e.owner_id = ? and not e.disabled) * (
                        (select count(*) from webhook_messages where owner_id = ? and not fanned_out)
                        -- Conversations owed conversation.events messages not made yet: at least one each.
                        + (select count(*) from conversations where owner_id = ? and webhook_events_from is not null))
                      + (select count(*) from webhook_deliveries d join webhook_messages m on m.id = d.message_id
                         where m.owner_id = ? and d.state = 'pending'))::integer as pending`,
      [ownerId, ownerId, ownerId, ownerId, ownerId, ownerId],
    );
    return row!;
  };
  const start = performance.now();
  const first = await count();
  let last = first;
  while (last.pending > 0 && performance.now() - start < limitMs) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    last = await count();
  }
  return {
    messages: last.messages,
    deliveries: last.deliveries,
    pendingAtEnd: first.pending,
    drained: first.pending - last.pending,
    pendingAfter: last.pending,
    seconds: (performance.now() - start) / 1000,
  };
}

async function main(): Promise<void> {
  if (!fs.existsSync(path.join(KIT, 'run-all.sh'))) {
    throw new Error(`no bench kit at ${KIT} (set BENCH_KIT to the directory holding run-all.sh)`);
  }
  const config = loadConfig({
    ...process.env,
    DATA_DIR: process.env.BENCH_DATA_DIR ?? '.data/bench',
    EMBEDDED_PG_PORT: process.env.BENCH_EMBEDDED_PG_PORT ?? '25449',
  });
  const database = await openDatabase(config.database, createLogger('warn'));
  const connection = database.orm.em.getConnection();
  const ownerId = randomUUID();
  const sessionKey = generateSecret('session_api_key');
  await connection.execute('insert into users (id, email) values (?, ?)', [ownerId, `bench-${ownerId}@example.com`]);
  await connection.execute('insert into credentials (id, user_id, kind, secret_hash) values (?, ?, ?, ?)', [
    randomUUID(),
    ownerId,
    'session_api_key',
    hashSecret(sessionKey),
  ]);

  const endpointCount = Number(process.env.BENCH_WEBHOOK_ENDPOINTS ?? 0);
  const port = Number(process.env.BENCH_PORT ?? (await freePort()));
  const url = `http://127.0.0.1:${port}`;
  const outbound = endpointCount > 0 ? { OUTBOUND_WEBHOOK_ALLOW_HTTP: 'true', OUTBOUND_WEBHOOK_ALLOW_PRIVATE: 'true' } : {};
  // BENCH_SERVER_NODE_FLAGS: the server's Node.js flags instead of SERVER_NODE_FLAGS ('' for none), to compare runtime settings.
  const startServer = (serverPort: number, env: Readonly<Record<string, string>>) =>
    spawn(process.execPath, serverNodeArgs('src/main.ts', process.env.BENCH_SERVER_NODE_FLAGS?.split(' ').filter(Boolean)), {
      cwd: ROOT,
      env: { ...process.env, ...outbound, DATABASE_URL: database.url, PORT: String(serverPort), LOG_LEVEL: 'warn', ...env },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
  const server = startServer(port, backgroundNice === undefined ? {} : WEBHOOK_INSTANCE_ENV);
  const backgroundPort = backgroundNice === undefined ? undefined : await freePort();
  const background = backgroundPort === undefined ? undefined : startServer(backgroundPort, DELIVERY_INSTANCE_ENV);
  if (background) os.setPriority(background.pid!, backgroundNice!);
  const started = new Date();
  const openLoopRate = Number(process.env.BENCH_OPEN_LOOP_RATE ?? 1000);
  const openLoopRuns = Number(process.env.BENCH_OPEN_LOOP_RUNS ?? 3);
  let result: { table: string; notes: string[] };
  let subscribed: { table: string; notes: string[] } | undefined;
  let drain: Drain | undefined;
  let alternated: AlternatedRound[] = [];
  const openLoop: OpenLoopRun[] = [];
  let endpoints: ChildProcess | undefined;
  try {
    await waitForReady(url);
    if (background) await waitForReady(`http://127.0.0.1:${backgroundPort}`);
    result = await runKit(database.url, url, sessionKey);
    if (endpointCount > 0) {
      // The same server, again, with the endpoints subscribed: both tables come from one run.
      process.stderr.write(`again with ${endpointCount} outbound endpoints subscribed to conversation.events\n`);
      endpoints = await subscribeEndpoints(database.url, `bench-${ownerId}@example.com`, endpointCount);
      subscribed = await runKit(database.url, url, sessionKey);
      drain = await waitForDeliveries(connection, ownerId);
      alternated = await alternate(connection, ownerId, url, sessionKey);
    }
    for (let run = 0; openLoopRate > 0 && run < openLoopRuns; run++) {
      process.stderr.write(`open loop ${run + 1}/${openLoopRuns}: ${openLoopRate} req/s of batch 5\n`);
      openLoop.push(await runOpenLoop(url, sessionKey, openLoopRate, process.env.BENCH_SECONDS ?? '10'));
    }
  } finally {
    await stopChild(server);
    if (background) await stopChild(background);
    if (endpoints) await stopChild(endpoints);
    // Queue jobs of the bench's messages too: the next run's worker would otherwise work through them.
    await connection.execute(
      `delete from pgboss.job j using webhook_messages m where j.name = 'webhook-delivery' and m.id = j.data->>'message_id' and m.owner_id = ?`,
      [ownerId],
    );
    await connection.execute('delete from webhook_messages where owner_id = ?', [ownerId]);
    await connection.execute('delete from conversation_events where conversation_id in (select id from conversations where owner_id = ?)', [ownerId]);
    await connection.execute('delete from conversations where owner_id = ?', [ownerId]);
    await connection.execute('delete from credentials where user_id = ?', [ownerId]);
    await connection.execute('delete from users where id = ?', [ownerId]);
    await database.close();
  }

  const knobs = ['BENCH_SECONDS', 'BENCH_BATCHES', 'BENCH_CONNECTIONS', 'BENCH_CONCURRENCY', 'BENCH_SELFTEST', 'BENCH_WEBHOOK_ENDPOINTS', 'BENCH_DELIVERY_INSTANCE']
    .filter((name) => process.env[name] !== undefined)
    .map((name) => `${name}=${JSON.stringify(process.env[name])}`);
  const ingest = ['INGEST_MAX_TRANSACTIONS', 'INGEST_GROUP_MAX_BATCHES', 'INGEST_GROUP_MAX_EVENTS', 'DB_POOL_SIZE']
    .filter((name) => process.env[name] !== undefined)
    .map((name) => `${name}=${process.env[name]}`);
  const [table, ratios] = result.table.split(/\n\s*\n/);
  console.log(`\nMeasured ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC with \`${[...knobs, ...ingest, 'npm run bench'].join(' ')}\``);
  console.log(`(the bench kit's \`run-all.sh\`; database: ${config.database.kind === 'url' ? 'DATABASE_URL' : 'embedded PostgreSQL'}).`);
  for (const note of result.notes) console.log(`${note}.`);
  console.log(`\n${table}\n`);
  for (const line of (ratios ?? '').trim().split('\n').filter(Boolean)) console.log(`- ${line}`);
  if (subscribed) printComparison(endpointCount, result.table, subscribed.table, drain!);
  if (alternated.length > 0) printAlternated(endpointCount, alternated);
  if (openLoop.length === 0) return;
  console.log(`\nOpen loop, ${openLoopRate} requests/s of batch 5 (the kit's \`load.mjs --rate\`, 3 s warm-up each), same server:\n`);
  console.log('| run | served req/s | p50 ms | p99 ms | non2xx | errors |');
  console.log('|-----|--------------|--------|--------|--------|--------|');
  openLoop.forEach((run, index) =>
    console.log(`| ${index + 1} | ${run.requests_per_s} | ${run.p50_ms} | ${run.p99_ms} | ${run.non2xx} | ${run.errors} |`),
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
