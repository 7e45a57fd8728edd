/**
 * Read benchmark (issue 20): seeds a database of its own with BENCH_READ_EVENTS events over
 * BENCH_READ_CONVERSATIONS conversations of one user, one of them holding BENCH_READ_BIG events
 * (payloads from the shared bench kit's `events.mjs`, stored through `ingest_event_batches` as the
 * webhook stores them), then times each read of the issue over a server it starts (no other load),
 * prints a Markdown table of p50/p99, the EXPLAIN (ANALYZE, BUFFERS) of each statement, and the export
 * of the big conversation (MB/s, server RSS growth).
 *
 *   BENCH_READ_DATABASE_URL=postgres://postgres@127.0.0.1:5432/benchread npm run bench:read
 *   BENCH_READ_EVENTS=200000 BENCH_READ_CONVERSATIONS=2000 BENCH_READ_BIG=50000 npm run bench:read   # small first
 *
 * Defaults: 5,000,000 events, 50,000 conversations, 500,000 in the big one, 200 requests per read
 * (BENCH_READ_REQUESTS). The database's public schema is dropped and recreated unless it already holds
 * a seed of the same size (BENCH_READ_RESEED=1 forces it).
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../src/config.ts';
import { openDatabase, migrate } from '../src/db/database.ts';
import { createLogger } from '../src/logger.ts';
import { generateSecret, hashSecret } from '../src/identity/secrets.ts';
import { conversationCountQuery, conversationPageQuery, eventCountQuery, eventPageQuery } from '../src/conversations/queries.ts';
import { conversationCursor, conversationFilterOf, eventCursor, eventFilterOf } from '../src/conversations/search.ts';
import { freePort } from './lib/free-port.ts';
import { seedReadDatabase, type MakeBatch } from './lib/read-seed.ts';
import { serverNodeArgs } from '../src/server-node-flags.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
// The shared kit beside the project (main checkout) or beside its worktree directory.
const KIT = process.env.BENCH_KIT
  ? path.resolve(ROOT, process.env.BENCH_KIT)
  : [path.resolve(ROOT, '../shared/bench'), path.resolve(ROOT, '../../shared/bench')].find((dir) => fs.existsSync(dir))!;
const EVENTS = Number(process.env.BENCH_READ_EVENTS ?? 5_000_000);
const CONVERSATIONS = Number(process.env.BENCH_READ_CONVERSATIONS ?? 50_000);
const BIG = Number(process.env.BENCH_READ_BIG ?? 500_000);
const REQUESTS = Number(process.env.BENCH_READ_REQUESTS ?? 200);
const URL_ = process.env.BENCH_READ_DATABASE_URL ?? process.env.DATABASE_URL;

function log(message: string): void {
  process.stderr.write(`[bench:read ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

async function main(): Promise<void> {
  if (!URL_) throw new Error('set BENCH_READ_DATABASE_URL (or DATABASE_URL) to a database of its own, e.g. …/benchread');
  const { makeBatch } = (await import(path.join(KIT, 'events.mjs'))) as { makeBatch: MakeBatch };
  const config = loadConfig({ ...process.env, DATABASE_URL: URL_, LOG_LEVEL: 'warn' });
  const database = await openDatabase(config.database, createLogger('warn'));
  const connection = database.orm.em.getConnection();
  const knexClient = connection.getKnex().client;
  const pg = await knexClient.acquireConnection();
  const q = async <T>(text: string, values: unknown[] = []): Promise<T[]> => (await pg.query({ text, values })).rows as T[];

  const seeded = await q<{ n: string }>(`select coalesce(sum(event_count), 0)::text as n from conversations`);
  if (process.env.BENCH_READ_RESEED === '1' || Number(seeded[0]!.n) !== EVENTS) {
    await q('drop schema public cascade');
    await q('create schema public');
    await migrate(database.orm);
    await seedReadDatabase(q, makeBatch, { events: EVENTS, conversations: CONVERSATIONS, big: BIG });
  } else {
    log(`reusing the seed of ${EVENTS} events`);
  }
  const [user] = await q<{ id: string }>('select id from users limit 1');
  const ownerId = user!.id;
  const token = generateSecret('access_token');
  await q(`insert into credentials (id, user_id, kind, secret_hash) values ($1, $2, 'access_token', $3)`, [randomUUID(), ownerId, hashSecret(token)]);
  const [big] = await q<{ id: string; event_count: number }>('select id, event_count from conversations order by event_count desc limit 1');
  const bigId = big!.id;
  const eventIds = (await q<{ event_id: string }>(
    `select event_id from conversation_events where conversation_id = $1 and seq = any($2::int[])`,
    [bigId, Array.from({ length: REQUESTS }, () => 1 + Math.floor(Math.random() * big!.event_count))],
  )).map((row) => row.event_id);

  // Positions of deep pages, built as the server builds them.
  const desc50 = eventCursor(eventFilterOf({}), 'desc', big!.event_count - 49 * 100 + 1);
  const listFilter = conversationFilterOf({});
  const [deep] = await q<{ key: string; id: string }>(
    `select to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as key, id from conversations
     where owner_id = $1 order by created_at desc, id desc offset $2 limit 1`,
    [ownerId, 1999 * 20 - 1],
  );
  const page2000 = deep ? conversationCursor(listFilter, 'created_desc', deep) : undefined;
  const word = 'flaky';

  const reads: { name: string; path: string; sql?: [string, unknown[]]; each?: (i: number) => string }[] = [
    { name: 'newest 100 events of the big conversation', path: `/api/v1/conversations/${bigId}/events?order=desc&limit=100`, sql: eventPageQuery(bigId, eventFilterOf({}), 'desc', 101) },
    { name: 'its newest 50 MessageEvents', path: `/api/v1/conversations/${bigId}/events?order=desc&kind=MessageEvent&limit=50`, sql: eventPageQuery(bigId, eventFilterOf({ kinds: ['MessageEvent'] }), 'desc', 51) },
    { name: 'a kind it does not have (PauseEvent)', path: `/api/v1/conversations/${bigId}/events?kind=PauseEvent&limit=100`, sql: eventPageQuery(bigId, eventFilterOf({ kinds: ['PauseEvent'] }), 'asc', 101) },
    { name: 'page 50 going backwards (limit 100, cursor)', path: `/api/v1/conversations/${bigId}/events?order=desc&limit=100&cursor=${desc50}`, sql: eventPageQuery(bigId, eventFilterOf({ beforeSeq: big!.event_count - 49 * 100 + 1 }), 'desc', 101) },
    { name: 'count with a kind filter (MessageEvent)', path: `/api/v1/conversations/${bigId}/events/count?kind=MessageEvent`, sql: eventCountQuery(bigId, eventFilterOf({ kinds: ['MessageEvent'] })) },
    { name: 'an event by id', path: '', each: (i) => `/api/v1/conversations/${bigId}/events/${eventIds[i % eventIds.length]}`, sql: ['select seq, received_at, payload::text as payload from conversation_events where conversation_id = $1 and event_id = $2', [bigId, eventIds[0]]] },
    { name: `title search (q=${word}) over ${CONVERSATIONS} conversations`, path: `/api/v1/conversations?q=${word}`, sql: conversationPageQuery(ownerId, conversationFilterOf({ q: word }), 'created_desc', 21) },
    { name: 'conversation list, first page', path: '/api/v1/conversations', sql: conversationPageQuery(ownerId, listFilter, 'created_desc', 21) },
    ...(page2000 ? [{ name: 'conversation list, page 2,000', path: `/api/v1/conversations?cursor=${page2000}`, sql: conversationPageQuery(ownerId, listFilter, 'created_desc', 21, deep) }] : []),
    { name: 'conversation count with q (extra)', path: `/api/v1/conversations/count?q=${word}`, sql: conversationCountQuery(ownerId, conversationFilterOf({ q: word })) },
    { name: 'conversation list sort=updated_desc (extra, no index by design)', path: '/api/v1/conversations?sort=updated_desc', sql: conversationPageQuery(ownerId, listFilter, 'updated_desc', 21) },
  ];

  const port = await freePort();
  const server = spawn(process.execPath, serverNodeArgs(), {
    cwd: ROOT,
    // The bench measures the queries, from one token far faster than a person: the reads limit would answer 429.
    env: { RATE_LIMIT_READS: 'off', ...process.env, DATABASE_URL: URL_, PORT: String(port), LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const base = `http://127.0.0.1:${port}`;
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        if ((await fetch(`${base}/readyz`)).ok) break;
      } catch {
        // not listening yet
      }
      if (attempt > 600) throw new Error('the server did not become ready');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const headers = { 'X-Access-Token': token };
    // node:http on one kept-alive connection, as the ingest bench's autocannon: fetch (undici) cost the
    // client as much time per 100 KB page as the server took to answer it.
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const get = (pathAndQuery: string) =>
      new Promise<number>((resolve, reject) => {
        http
          .get(`${base}${pathAndQuery}`, { agent, headers }, (response) => {
            response.on('data', () => undefined);
            response.on('end', () => resolve(response.statusCode ?? 0));
          })
          .on('error', reject);
      });
    const rows: string[] = [];
    for (const read of reads) {
      for (let i = 0; i < 10; i++) await get(read.each ? read.each(i) : read.path);
      const times: number[] = [];
      for (let i = 0; i < REQUESTS; i++) {
        const started = performance.now();
        const status = await get(read.each ? read.each(i) : read.path);
        times.push(performance.now() - started);
        if (status !== 200) throw new Error(`${read.name}: ${status}`);
      }
      times.sort((a, b) => a - b);
      rows.push(`| ${read.name} | ${percentile(times, 50).toFixed(1)} | ${percentile(times, 99).toFixed(1)} |`);
      log(rows[rows.length - 1]!);
    }

    // The export of the big conversation: throughput and the server's resident memory meanwhile.
    const rss = () => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${server.pid}/status`, 'utf8'))![1]) * 1024;
    const rssBefore = rss();
    let rssPeak = rssBefore;
    const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, rss())), 50);
    const started = performance.now();
    const response = await fetch(`${base}/api/v1/conversations/${bigId}/export`, { headers });
    let bytes = 0;
    let lines = 0;
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      bytes += chunk.length;
      const buffer = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length);
      for (let at = buffer.indexOf(10); at !== -1; at = buffer.indexOf(10, at + 1)) lines++;
    }
    const seconds = (performance.now() - started) / 1000;
    clearInterval(sampler);

    const load = fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
    const [version] = await q<{ v: string }>("select current_setting('server_version') as v");
    console.log(`### Read benchmark, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC\n`);
    console.log(`\`npm run bench:read\`: ${EVENTS.toLocaleString('en')} events, ${CONVERSATIONS.toLocaleString('en')} conversations of one user, ` +
      `the big one ${big!.event_count.toLocaleString('en')} events; ${REQUESTS} sequential requests per read after 10 warm-up (node:http, one kept-alive connection); ` +
      `PostgreSQL ${version!.v}, Node ${process.version}; load average after the run ${load}.\n`);
    console.log('| read | p50 ms | p99 ms |\n|---|---|---|');
    for (const row of rows) console.log(row);
    console.log(`\nExport of the big conversation: ${lines.toLocaleString('en')} lines, ${(bytes / 1e6).toFixed(1)} MB in ${seconds.toFixed(1)} s = ` +
      `**${(bytes / 1e6 / seconds).toFixed(1)} MB/s**; server RSS ${(rssBefore / 2 ** 20).toFixed(0)} MB before, peak ${(rssPeak / 2 ** 20).toFixed(0)} MB ` +
      `(**+${((rssPeak - rssBefore) / 2 ** 20).toFixed(1)} MB**).\n`);
    console.log('#### Plans (EXPLAIN (ANALYZE, BUFFERS) of each statement, as the server sends it)\n');
    for (const read of reads) {
      if (!read.sql) continue;
      const plan = await q<{ 'QUERY PLAN': string }>(`explain (analyze, buffers) ${read.sql[0]}`, read.sql[1]);
      console.log(`${read.name}:\n\n\`\`\`\n${plan.map((row) => row['QUERY PLAN']).join('\n')}\n\`\`\`\n`);
    }
  } finally {
    server.kill('SIGTERM');
    knexClient.releaseConnection(pg);
    await database.close();
  }
}

await main();
