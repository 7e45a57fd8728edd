/**
 * Delivery bench (issue 38, "Delivery that keeps up"): how fast outbound webhooks go out, on a server
 * process of their own, to N endpoints (10) at a fast local receiver. Prints Markdown tables, asserts nothing.
 *
 *   DATABASE_URL=postgres://…/mydb npm run bench:delivery
 *
 * A fresh database `<mydb>_bench_<time>` is made on that PostgreSQL (dropped at the end unless
 * BENCH_KEEP_DATABASE=1); the server runs from BENCH_SERVER_ROOT (this checkout: point it at another
 * worktree to measure other code with the same bench). Phases, on one server:
 *   0. a closed loop (batch 5, 16 in flight, 5 s) with no endpoint: the rate half of which (b) sends;
 *   a. BENCH_DELIVERY_EVENTS (50,000) events sent as fast as the server takes them (batch 5, 16 in flight),
 *      then nothing: deliveries a second once the ingest stopped, until the backlog is gone;
 *   b. an open loop (a request every 1/rate s, whatever the answers) at BENCH_DELIVERY_RATE requests/s of batch 5 (half the rate
 *      of phase 0) for BENCH_DELIVERY_SECONDS (30): latency from commit to the receiver, p50/p99.
 * The load runs in a process of its own (scripts/lib/ingest-load.ts, the kit's events). Latency = arrival at the receiver − the message's `timestamp` (its first event's `received_at`, the
 * ingest transaction's start, a few ms before its commit). The backlog, every second, is what the
 * database still owes (see backlogOf): pending deliveries, plus (messages not fanned out + conversations owed a message)
 * × enabled endpoints. The receiver answers 204 at once over kept-alive connections, counts each
 * (message, endpoint) once, and checks every 100th signature with `standardwebhooks`.
 * The drain's CPU (the server's, and the database backends') per delivery is printed too: on a busy
 * machine the rate follows the CPU share the processes get, the CPU per delivery does not.
 * BENCH_DELIVERY_CONVERSATIONS (64) spreads the load over that many conversations: as many as phase a's
 * batches (a fifth of its events) makes every message one batch, traffic that delivery cannot group.
 * BENCH_SERVER_NODE_FLAGS adds Node.js flags to the server (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`).
 * BENCH_DELIVERY_INSTANCE=<nice> splits the server in two, as docs/scaling.md suggests: the load goes to an
 * instance with `OUTBOUND_WEBHOOK_WORKER=false`, and a second instance, at that scheduling priority (`nice`,
 * 0–19) and with `SEARCH_INDEXER=false`, delivers; the CPU figures are the two instances' together.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { freePort } from './lib/free-port.ts';
import fs from 'node:fs';
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/db/database.ts';
import { generateSecret, hashSecret } from '../src/identity/secrets.ts';
import { createLogger } from '../src/logger.ts';
import { PgBossOutboundQueue } from '../src/outbound/outbound-queue.ts';
import { WebhookEndpointService } from '../src/outbound/webhook-endpoint-service.ts';
import { secretBoxFor } from '../src/workspaces/setup.ts';
import { SERVER_NODE_FLAGS, serverNodeArgs } from '../src/server-node-flags.ts';
import { stopChild } from './lib/stop-child.ts';
import { benchDeliveryNice, DELIVERY_INSTANCE_ENV, WEBHOOK_INSTANCE_ENV } from './lib/delivery-instance.ts';
import { personalPrincipal } from './lib/personal-principal.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const KIT = path.resolve(ROOT, process.env.BENCH_KIT ?? '../shared/bench');
const SERVER_ROOT = path.resolve(process.env.BENCH_SERVER_ROOT ?? ROOT);
const ENDPOINTS = Number(process.env.BENCH_DELIVERY_ENDPOINTS ?? 10);
const EVENTS = Number(process.env.BENCH_DELIVERY_EVENTS ?? 50_000);
const OPEN_SECONDS = Number(process.env.BENCH_DELIVERY_SECONDS ?? 30);
/** Conversations the load spreads its batches over: each is a message's worth, so as many as batches delivers each batch alone. */
const CONVERSATIONS = String(process.env.BENCH_DELIVERY_CONVERSATIONS ?? 64);
const DRAIN_LIMIT_MS = Number(process.env.BENCH_DELIVERY_DRAIN_SECONDS ?? 120) * 1000;
/** The background instance's niceness when the server is split in two (BENCH_DELIVERY_INSTANCE), else undefined. */
const BACKGROUND_NICE = benchDeliveryNice();

/** What the receiver saw: first deliveries per second, latencies of the messages made in a window. */
class Receiver {
  readonly server: http.Server;
  readonly seen = new Set<string>();
  duplicates = 0;
  /** Events in the deliveries seen (a `conversation.events` message carries `to_seq − from_seq + 1`). */
  events = 0;
  signaturesChecked = 0;
  signaturesBad = 0;
  latenciesMs: number[] = [];
  /** Messages whose timestamp falls in [from, to) get their latency recorded. */
  window: { from: number; to: number } | undefined;
  private readonly verifiers = new Map<string, Webhook>();

  constructor() {
    this.server = http.createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        const arrived = Date.now();
        response.statusCode = 204;
        response.end();
        this.note(request, Buffer.concat(chunks).toString('utf8'), arrived);
      });
    });
    this.server.keepAliveTimeout = 65_000;
  }

  secret(path: string, secret: string): void {
    this.verifiers.set(path, new Webhook(secret));
  }

  private note(request: http.IncomingMessage, body: string, arrived: number): void {
    const key = `${request.url}|${request.headers['webhook-id']}`;
    if (this.seen.has(key)) {
      this.duplicates++;
      return;
    }
    this.seen.add(key);
    if (this.seen.size % 100 === 0) this.verify(request, body);
    // `{"type":"…","timestamp":"<ISO>",…`: read without parsing the whole body.
    const at = body.indexOf('"timestamp":"');
    const stamp = at < 0 ? NaN : Date.parse(body.slice(at + 13, body.indexOf('"', at + 13)));
    const range = /"from_seq":(\d+),"to_seq":(\d+)/.exec(body.slice(0, 200));
    this.events += range ? Number(range[2]) - Number(range[1]) + 1 : 1;
    if (this.window && stamp >= this.window.from && stamp < this.window.to) this.latenciesMs.push(arrived - stamp);
  }

  private verify(request: http.IncomingMessage, body: string): void {
    this.signaturesChecked++;
    try {
      this.verifiers.get(request.url!)!.verify(body, request.headers as Record<string, string>);
    } catch {
      this.signaturesBad++;
    }
  }
}

interface Sample {
  second: number;
  phase: string;
  delivered: number;
  pending: number;
  owedEvents: number;
  /** The server's `webhook_batches_waiting` and `event_loop_busy_ratio`: what delivery's yielding looks at. */
  waiting: number;
  loopBusy: number;
  /** The server's `background_work_rest_factor`: how much delivery rests after each unit. */
  restFactor: number;
}

/**
 * The database's backlog: pending deliveries, plus messages not fanned out yet × enabled endpoints, plus
 * conversations owed a message not made yet (one each, however many transactions: a lower bound) × endpoints;
 * and the events not yet in a message (what the last term stands for).
 */
async function backlogOf(db: pg.Client): Promise<{ pending: number; owedEvents: number }> {
  const { rows } = await db.query<{ pending: number; owed_events: number }>(
    `select ((select count(*) from webhook_endpoints e where not e.disabled) * (
               (select count(*) from webhook_messages where not fanned_out)
               + (select count(*) from conversations where webhook_events_from is not null))
             + (select count(*) from webhook_deliveries where state = 'pending'))::integer as pending,
            (select coalesce(sum(event_count - webhook_events_from + 1), 0) from conversations where webhook_events_from is not null)::integer as owed_events`,
  );
  return { pending: rows[0]!.pending, owedEvents: rows[0]!.owed_events };
}

async function backlog(db: pg.Client): Promise<number> {
  return (await backlogOf(db)).pending;
}

/** Samples the backlog and the receiver's count every second, under the current phase's name. */
class Sampler {
  readonly samples: Sample[] = [];
  phase = '';
  private timer: NodeJS.Timeout | undefined;
  private lastDelivered = 0;
  private readonly start = performance.now();
  private busy = false;

  constructor(
    private readonly db: pg.Client,
    private readonly receiver: Receiver,
    private readonly serverUrl: string,
  ) {}

  run(): void {
    this.timer = setInterval(() => void this.sample(), 1_000);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async sample(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    const delivered = this.receiver.seen.size;
    const second = Math.round((performance.now() - this.start) / 1000);
    const { pending, owedEvents } = await backlogOf(this.db);
    const metrics = await fetch(`${this.serverUrl}/metrics`).then((r) => r.text()).catch(() => '');
    const gauge = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(metrics)?.[1] ?? NaN);
    this.samples.push({
      second,
      phase: this.phase,
      delivered: delivered - this.lastDelivered,
      pending,
      owedEvents,
      waiting: gauge('webhook_batches_waiting'),
      loopBusy: gauge('event_loop_busy_ratio'),
      restFactor: gauge('background_work_rest_factor'),
    });
    this.lastDelivered = delivered;
    this.busy = false;
  }

  last(): Sample | undefined {
    return this.samples.at(-1);
  }
}

/** CPU seconds (user + system) a process has used so far, from /proc (Linux); 0 when it is gone. */
function cpuSeconds(pid: number): number {
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

/** CPU seconds of the server and of the database's backends (their pids now) so far: the drain's cost, whatever the machine's load. */
async function cpuOf(db: pg.Client, serverPids: readonly number[], database: string): Promise<{ server: number; postgres: Map<number, number> }> {
  // The bench's own connection (the backlog samples) is not the server's cost.
  const { rows } = await db.query<{ pid: number }>('select pid from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [database]);
  return { server: serverPids.reduce((total, pid) => total + cpuSeconds(pid), 0), postgres: new Map(rows.map((r) => [r.pid, cpuSeconds(r.pid)])) };
}

function cpuSince(before: { server: number; postgres: Map<number, number> }, after: { server: number; postgres: Map<number, number> }): { server: number; postgres: number } {
  let postgres = 0;
  for (const [pid, seconds] of after.postgres) postgres += seconds - (before.postgres.get(pid) ?? 0);
  return { server: after.server - before.server, postgres };
}

async function waitForReady(url: string, server: ChildProcess): Promise<void> {
  for (let attempt = 0; attempt < 600; attempt++) {
    if (server.exitCode !== null) throw new Error(`the server exited with ${server.exitCode}`);
    try {
      if ((await fetch(`${url}/readyz`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the server did not become ready');
}

interface LoadRun {
  requests: number;
  events: number;
  seconds: number;
  requests_per_s: number;
  events_per_s: number;
  p50_ms: number;
  p99_ms: number;
  failed: number;
}

/** The processes this bench started: stopped with it when it is interrupted (SIGINT, SIGTERM, SIGHUP). */
const children = new Set<ChildProcess>();
function tracked<T extends ChildProcess>(child: T): T {
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}
for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143], ['SIGHUP', 129]] as const) {
  process.once(signal, () => {
    process.stderr.write(`bench:delivery: ${signal}, stopping ${children.size} processes (its database is left as it is)\n`);
    void Promise.all([...children].map(stopChild)).finally(() => process.exit(code));
  });
}

/** One run of the ingest load (scripts/lib/ingest-load.ts) in its own process: the JSON line it prints. */
async function runLoad(url: string, key: string, args: string[]): Promise<LoadRun> {
  const child = tracked(
    spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'scripts/lib/ingest-load.ts'), url, key, KIT, '--conversations', CONVERSATIONS, ...args], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
    }),
  );
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`ingest-load ${args.join(' ')} exited with ${code}`);
  return JSON.parse(output.trim().split('\n').at(-1)!) as LoadRun;
}

/** Until the backlog is gone and the receiver has seen every delivery the database made (or the limit). */
async function waitForDrain(db: pg.Client, receiver: Receiver): Promise<boolean> {
  const start = performance.now();
  while (performance.now() - start < DRAIN_LIMIT_MS) {
    await new Promise((r) => setTimeout(r, 250));
    if ((await backlog(db)) > 0) continue;
    const { rows } = await db.query<{ done: number }>(`select count(*)::integer as done from webhook_deliveries where state = 'succeeded'`);
    if (receiver.seen.size >= rows[0]!.done) return true;
  }
  return false;
}

const percentile = (sorted: number[], p: number) => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!);
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

async function main(): Promise<void> {
  const baseUrl = process.env.DATABASE_URL;
  if (!baseUrl) throw new Error('DATABASE_URL is needed (a PostgreSQL on which this bench may create a database)');
  const name = `${new URL(baseUrl).pathname.slice(1) || 'bench'}_bench_${Date.now()}`;
  const admin = new pg.Client({ connectionString: baseUrl });
  await admin.connect();
  await admin.query(`create database "${name}"`);
  const databaseUrl = Object.assign(new URL(baseUrl), { pathname: `/${name}` }).toString();

  const receiver = new Receiver();
  await new Promise<void>((resolve) => receiver.server.listen(0, '127.0.0.1', resolve));
  const receiverPort = (receiver.server.address() as { port: number }).port;
  const port = await freePort();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-delivery-'));
  const url = `http://127.0.0.1:${port}`;
  const extraFlags = process.env.BENCH_SERVER_NODE_FLAGS?.split(' ').filter(Boolean) ?? [];
  const startServer = (serverPort: number, env: Readonly<Record<string, string>>) =>
    tracked(spawn(process.execPath, serverNodeArgs('src/main.ts', [...SERVER_NODE_FLAGS, ...extraFlags]), {
      cwd: SERVER_ROOT,
      env: {
        ...process.env,
        DATABASE_URL: databaseUrl,
        DATA_DIR: dataDir,
        PORT: String(serverPort),
        LOG_LEVEL: 'warn',
        OUTBOUND_WEBHOOK_ALLOW_HTTP: 'true',
        OUTBOUND_WEBHOOK_ALLOW_PRIVATE: 'true',
        ...env,
      },
      stdio: ['ignore', 'inherit', 'inherit'],
    }));
  const split = BACKGROUND_NICE !== undefined;
  const server = startServer(port, split ? WEBHOOK_INSTANCE_ENV : {});
  const servers = [server];
  let backgroundUrl: string | undefined;
  if (split) {
    const backgroundPort = await freePort();
    backgroundUrl = `http://127.0.0.1:${backgroundPort}`;
    const background = startServer(backgroundPort, DELIVERY_INSTANCE_ENV);
    os.setPriority(background.pid!, BACKGROUND_NICE);
    servers.push(background);
  }
  const db = new pg.Client({ connectionString: databaseUrl });
  const started = new Date();
  const load = os.loadavg();
  let sampler: Sampler | undefined;
  try {
    await waitForReady(url, server);
    if (backgroundUrl) await waitForReady(backgroundUrl, servers[1]!);
    await db.connect();
    const ownerId = randomUUID();
    const key = generateSecret('session_api_key');
    await db.query('insert into users (id, email) values ($1, $2)', [ownerId, `bench-${ownerId}@example.com`]);
    await db.query('insert into credentials (id, user_id, kind, secret_hash) values ($1, $2, $3, $4)', [randomUUID(), ownerId, 'session_api_key', hashSecret(key)]);

    process.stderr.write('phase 0: closed loop, batch 5, 5 s, no endpoint\n');
    const closed = await runLoad(url, key, ['--seconds', '5']);
    const rate = Number(process.env.BENCH_DELIVERY_RATE ?? Math.round(closed.requests_per_s / 2));

    // The endpoints as the API makes them (the server's key file: the same DATA_DIR), unlimited in number.
    const config = loadConfig({ ...process.env, DATABASE_URL: databaseUrl, DATA_DIR: dataDir });
    const database = await openDatabase(config.database, createLogger('warn'));
    try {
      const queue = new PgBossOutboundQueue(database.orm.em.getConnection().getKnex(), createLogger('warn'));
      const settings = { ...config.outboundWebhooks, allowHttp: true, allowPrivate: true, maxEndpoints: Number.MAX_SAFE_INTEGER };
      const service = new WebhookEndpointService(database.orm.em.fork(), secretBoxFor(config), settings, queue);
      for (let i = 0; i < ENDPOINTS; i++) {
        const endpoint = await service.create(personalPrincipal(ownerId, `bench-${ownerId}@example.com`), { url: `http://127.0.0.1:${receiverPort}/r/${i}`, event_types: ['conversation.events'] });
        receiver.secret(`/r/${i}`, endpoint.secret);
      }
    } finally {
      await database.close();
    }
    // Everything phase 0 stored was before the endpoints: nothing to deliver. Wait out anything owed.
    await waitForDrain(db, receiver);

    sampler = new Sampler(db, receiver, url);
    sampler.run();
    sampler.phase = 'a: ingest';
    process.stderr.write(`phase a: ${EVENTS} events, batch 5, 16 in flight\n`);
    const sent = await runLoad(url, key, ['--events', String(EVENTS)]);
    sampler.phase = 'a: drain';
    const cpuAtStop = await cpuOf(db, servers.map((s) => s.pid!), name);
    const drainStart = performance.now();
    const deliveredAtStop = receiver.seen.size;
    const eventsAtStop = receiver.events;
    const atStop = await backlogOf(db);
    const drained = await waitForDrain(db, receiver);
    const drainSeconds = (performance.now() - drainStart) / 1000;
    const drainCount = receiver.seen.size - deliveredAtStop;
    const drainEvents = receiver.events - eventsAtStop;
    const drainCpu = cpuSince(cpuAtStop, await cpuOf(db, servers.map((s) => s.pid!), name));
    const aSamples = sampler.samples.filter((s) => s.phase === 'a: drain');
    const peak = Math.max(0, ...aSamples.map((s) => s.delivered));
    const aDelivered = receiver.seen.size;

    sampler.phase = 'b: open loop';
    process.stderr.write(`phase b: ${rate} requests/s of batch 5 for ${OPEN_SECONDS} s\n`);
    const openStart = Date.now();
    const eventsBeforeOpen = receiver.events;
    const deliveriesBeforeOpen = receiver.seen.size;
    receiver.window = { from: openStart, to: openStart + OPEN_SECONDS * 1000 };
    const open = await runLoad(url, key, ['--rate', String(rate), '--seconds', String(OPEN_SECONDS)]);
    receiver.window.to = Date.now();
    const openEvents = receiver.events - eventsBeforeOpen;
    const openDeliveries = receiver.seen.size - deliveriesBeforeOpen;
    sampler.phase = 'b: after';
    const bStop = await backlogOf(db);
    const bDrained = await waitForDrain(db, receiver);
    const bAfterSeconds = (Date.now() - receiver.window.to) / 1000;
    sampler.stop();
    const latencies = receiver.latenciesMs.sort((x, y) => x - y);
    const bSamples = sampler.samples.filter((s) => s.phase === 'b: open loop');
    const [messages] = (await db.query<{ n: number }>('select count(*)::integer as n from webhook_messages')).rows;

    const flags = [...SERVER_NODE_FLAGS, ...extraFlags].join(' ');
    console.log(`\nMeasured ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC, \`npm run bench:delivery\`, server from ${SERVER_ROOT === ROOT ? 'this checkout' : SERVER_ROOT}` +
      ` (node ${flags})${split ? `, split: delivery on a second instance at nice ${BACKGROUND_NICE}` : ''}, ${ENDPOINTS} endpoints to one local receiver, load average ${load.map((l) => l.toFixed(2)).join(' ')} at the start, ${os.loadavg().map((l) => l.toFixed(2)).join(' ')} at the end.`);
    console.log(`Phase 0 (no endpoint): ${fmt(closed.requests_per_s)} requests/s of batch 5 (${fmt(closed.events_per_s)} events/s).\n`);
    console.log('| measure | value |');
    console.log('|---|---|');
    console.log(`| a: events sent (batch 5) | ${fmt(sent.events)} in ${sent.seconds.toFixed(1)} s (${fmt(sent.events_per_s)}/s), ${sent.failed} failed |`);
    console.log(`| a: delivered while ingesting / backlog when it stopped | ${fmt(deliveredAtStop)} / ${fmt(atStop.pending)} deliveries and ${fmt(atStop.owedEvents)} events not yet in a message |`);
    console.log(`| **a: deliveries/s after ingest stopped** | **${fmt(drainCount / drainSeconds)}** (${fmt(drainCount)} in ${drainSeconds.toFixed(1)} s${drained ? '' : ', not drained'}; best second ${fmt(peak)}) |`);
    console.log(`| a: events delivered/s after ingest stopped (events per delivery) | ${fmt(drainEvents / drainSeconds)} (${(drainEvents / Math.max(1, drainCount)).toFixed(1)}) |`);
    console.log(
      `| a: CPU per 1,000 deliveries in the drain: server / PostgreSQL | ${fmt((drainCpu.server * 1e6) / drainCount)} ms / ${fmt((drainCpu.postgres * 1e6) / drainCount)} ms` +
        ` (${fmt(drainCount / (drainCpu.server + drainCpu.postgres))} deliveries per CPU-second) |`,
    );
    console.log(`| b: open loop, requests/s of batch 5 (asked / served) | ${fmt(rate)} / ${fmt(open.requests_per_s)} (ingest p50 ${open.p50_ms} ms, p99 ${open.p99_ms} ms, failed ${open.failed}) |`);
    console.log(`| **b: commit → receiver p50 / p99** | **${fmt(percentile(latencies, 50))} ms / ${fmt(percentile(latencies, 99))} ms** (max ${fmt(latencies.at(-1) ?? NaN)} ms; ${fmt(latencies.length)} deliveries) |`);
    console.log(
      `| b: deliveries/s during the open loop (events per delivery) | ${fmt(bSamples.reduce((t, s) => t + s.delivered, 0) / Math.max(1, bSamples.length))}` +
        ` (${(openEvents / Math.max(1, openDeliveries)).toFixed(1)}) |`,
    );
    console.log(`| b: backlog when the load stopped / drained after | ${fmt(bStop.pending)} deliveries and ${fmt(bStop.owedEvents)} events not yet in a message / ${bDrained ? `${bAfterSeconds.toFixed(1)} s` : 'not drained'} |`);
    console.log(`| messages / deliveries received (duplicates) | ${fmt(messages!.n)} / ${fmt(receiver.seen.size)} (${receiver.duplicates}); a: ${fmt(aDelivered)} |`);
    console.log(`| signatures checked (bad) | ${receiver.signaturesChecked} (${receiver.signaturesBad}) |`);
    console.log('\nBacklog over time (each second: deliveries the receiver got in it; at its end, deliveries owed, events not yet in a message, and, of the server taking the load, its webhook batches waiting on average, its event loop\'s busy share and the rest factor of work behind it):\n');
    console.log('| s | phase | delivered | backlog (deliveries) | events not in a message | webhook batches waiting | event loop busy | rest factor |');
    console.log('|---:|---|---:|---:|---:|---:|---:|---:|');
    for (const s of sampler.samples) {
      console.log(`| ${s.second} | ${s.phase} | ${fmt(s.delivered)} | ${fmt(s.pending)} | ${fmt(s.owedEvents)} | ${s.waiting.toFixed(1)} | ${s.loopBusy.toFixed(2)} | ${s.restFactor.toFixed(1)} |`);
    }
  } finally {
    sampler?.stop();
    await Promise.all(servers.map(stopChild));
    await db.end().catch(() => undefined);
    receiver.server.close();
    receiver.server.closeAllConnections();
    if (process.env.BENCH_KEEP_DATABASE !== '1') await admin.query(`drop database if exists "${name}" with (force)`);
    await admin.end();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
