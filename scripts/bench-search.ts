/**
 * Search benchmark (issue 35): seeds a database of its own as the read benchmark does
 * (scripts/lib/read-seed.ts: the shared kit's events, through `ingest_event_batches`), with marker
 * texts in some events (below), indexes it with the SearchIndexer (timed), then times each search over
 * a server it starts (no other load) and prints a Markdown table of p50/p99, the index's size per
 * million events, and the EXPLAIN (ANALYZE, BUFFERS) of each statement.
 *
 *   BENCH_SEARCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/benchsearch npm run bench:search -- --events 200000
 *
 * `--events N` (default 5,000,000; conversations N/100, the big one N/10), `--requests N` (default 200).
 * The public schema is dropped and recreated unless it already holds an indexed seed of that size.
 *
 * Markers: `ECONNRESET` and `src/utils/timeutil.py` in 5 events (a selective term, a path); `quarantined`
 * in 1 % of the events with text; the phrase "connection reset by peer" in 0.1 %. The kit's own text gives
 * the common terms (`"exit code 0"` is in every observation, `src/server.ts` in about 1 in 25 events).
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../src/config.ts';
import { openDatabase, migrate } from '../src/db/database.ts';
import { createLogger } from '../src/logger.ts';
import { generateSecret, hashSecret } from '../src/identity/secrets.ts';
import { SearchIndexer } from '../src/search/indexer.ts';
import { parseSearchQuery } from '../src/search/query.ts';
import { hitCountQuery, hitPageQuery, type HitFilter } from '../src/search/queries.ts';
import { freePort } from './lib/free-port.ts';
import { seedReadDatabase, type MakeBatch } from './lib/read-seed.ts';
import { serverNodeArgs } from '../src/server-node-flags.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const KIT = process.env.BENCH_KIT
  ? path.resolve(ROOT, process.env.BENCH_KIT)
  : [path.resolve(ROOT, '../shared/bench'), path.resolve(ROOT, '../../shared/bench')].find((dir) => fs.existsSync(dir))!;
const { values: args } = parseArgs({ options: { events: { type: 'string' }, requests: { type: 'string' } } });
const EVENTS = Number(args.events ?? process.env.BENCH_SEARCH_EVENTS ?? 5_000_000);
const CONVERSATIONS = Math.max(2, Math.round(EVENTS / 100));
const BIG = Math.round(EVENTS / 10);
const REQUESTS = Number(args.requests ?? process.env.BENCH_SEARCH_REQUESTS ?? 200);
const URL_ = process.env.BENCH_SEARCH_DATABASE_URL ?? process.env.DATABASE_URL;
const SELECTIVE_EVERY = Math.floor(EVENTS / 5);

function log(message: string): void {
  process.stderr.write(`[bench:search ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** Appends `extra` to the event's main text (thought, output or message); events without text stay as they are. */
function appendText(event: Record<string, unknown>, extra: string): void {
  const holders = [
    (event.thought as { text: string }[] | undefined)?.[0],
    ((event.observation as { content?: { text: string }[] } | undefined)?.content ?? [])[0],
    ((event.llm_message as { content?: { text: string }[] } | undefined)?.content ?? [])[0],
  ];
  const holder = holders.find((h) => h && typeof h.text === 'string');
  if (holder) holder.text += ` ${extra}`;
}

function decorate(event: Record<string, unknown>, position: number): void {
  // Fresh copies: the seed reuses its templates.
  for (const key of ['thought', 'observation', 'llm_message']) if (event[key]) event[key] = structuredClone(event[key]);
  if (position % SELECTIVE_EVERY === SELECTIVE_EVERY - 1) appendText(event, 'Error: read ECONNRESET in src/utils/timeutil.py');
  if (position % 100 === 7) appendText(event, 'the test was quarantined');
  if (position % 1000 === 3) appendText(event, 'failed: connection reset by peer');
}

const LAG_CLIENTS = 4;
const LAG_BATCH = 5;
const LAG_SECONDS = 20;

/**
 * The index's lag under ingest: LAG_CLIENTS clients post batches to the server's webhook while this
 * process's indexer runs (as an instance's would); `indexed_through` is read every 200 ms.
 */
async function measureLag(
  base: string,
  sessionKey: string,
  accessToken: string,
  indexer: SearchIndexer,
): Promise<{ events: number; p50: number; p99: number; max: number }> {
  const { makeBatch } = (await import(path.join(KIT, 'events.mjs'))) as { makeBatch: MakeBatch };
  const until = Date.now() + LAG_SECONDS * 1000;
  let events = 0;
  indexer.start();
  const clients = Array.from({ length: LAG_CLIENTS }, async (_, client) => {
    const conversation = randomUUID();
    for (let round = 0; Date.now() < until; round++) {
      const batch = makeBatch(LAG_BATCH, client * 100_000 + round).map((event) => ({ ...event, id: randomUUID() }));
      const response = await fetch(`${base}/api/v1/webhooks/events/${conversation}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Session-API-Key': sessionKey },
        body: JSON.stringify(batch),
      });
      await response.arrayBuffer();
      if (response.status === 200) events += batch.length;
    }
  });
  const lags: number[] = [];
  const sampling = (async () => {
    while (Date.now() < until) {
      const response = await fetch(`${base}/api/v1/search/events/count?q=zzyzx`, { headers: { 'X-Access-Token': accessToken } });
      const { indexed_through } = (await response.json()) as { indexed_through: string };
      lags.push(Math.max(0, Date.now() - Date.parse(indexed_through)));
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  })();
  await Promise.all([...clients, sampling]);
  await indexer.stop();
  lags.sort((a, b) => a - b);
  return { events, p50: percentile(lags, 50), p99: percentile(lags, 99), max: lags[lags.length - 1]! };
}

async function main(): Promise<void> {
  if (!URL_) throw new Error('set BENCH_SEARCH_DATABASE_URL (or DATABASE_URL) to a database of its own, e.g. …/benchsearch');
  const { makeBatch } = (await import(path.join(KIT, 'events.mjs'))) as { makeBatch: MakeBatch };
  const config = loadConfig({ ...process.env, DATABASE_URL: URL_, LOG_LEVEL: 'warn' });
  const database = await openDatabase(config.database, createLogger('warn'));
  const connection = database.orm.em.getConnection();
  const knexClient = connection.getKnex().client;
  const pg = await knexClient.acquireConnection();
  const q = async <T>(text: string, values: unknown[] = []): Promise<T[]> => (await pg.query({ text, values })).rows as T[];

  // The seed's conversations are the first ones created: the lag measurement's, added later, do not count.
  const seeded = await q<{ n: string }>(
    `select coalesce(sum(event_count), 0)::text as n from (select event_count from conversations order by created_at limit $1) seed`,
    [CONVERSATIONS],
  ).catch(() => [{ n: '0' }]);
  let indexSeconds: number | undefined;
  if (Number(seeded[0]!.n) !== EVENTS) {
    await q('drop schema public cascade');
    await q('create schema public');
    await migrate(database.orm);
    await seedReadDatabase(q, makeBatch, { events: EVENTS, conversations: CONVERSATIONS, big: BIG }, decorate);
  } else {
    log(`reusing the seed of ${EVENTS} events`);
  }
  const indexer = new SearchIndexer(database.orm.em, { intervalMs: 100, batchEvents: 5_000 }, createLogger('warn'));
  const t0 = performance.now();
  const indexed = await indexer.catchUp();
  if (indexed > 0) {
    indexSeconds = (performance.now() - t0) / 1000;
    log(`indexed ${indexed} events in ${indexSeconds.toFixed(0)} s`);
    await q('vacuum analyze event_search');
    // The catch-up cleared every watermark: the statistics of the seed (all owed) would plan `indexed_through` as a scan of every conversation.
    await q('vacuum analyze conversations');
  }

  const [user] = await q<{ id: string }>('select id from users limit 1');
  const ownerId = user!.id;
  const token = generateSecret('access_token');
  await q(`insert into credentials (id, user_id, kind, secret_hash) values ($1, $2, 'access_token', $3)`, [randomUUID(), ownerId, hashSecret(token)]);
  const noFilter: HitFilter = { kinds: [], sources: [], conversationId: null, since: null, until: null };
  const [[total]] = [await q<{ n: number; rows: number }>('select count(*)::integer as n from event_search')];
  const frequency = async (query: string) => {
    const [row] = await q<{ count: number }>(...hitCountQuery(ownerId, parseSearchQuery(query), noFilter));
    return row!.count;
  };

  const searches = [
    { name: 'a selective term (ECONNRESET)', q: 'ECONNRESET' },
    { name: 'a term in 1 % of the events (quarantined)', q: 'quarantined' },
    { name: 'a phrase in 0.1 % ("connection reset by peer")', q: '"connection reset by peer"' },
    { name: 'a path substring, selective (utils/timeutil.py)', q: 'utils/timeutil.py' },
    { name: 'a path substring, common (src/server.ts)', q: 'src/server.ts' },
    { name: 'a common phrase ("exit code 0")', q: '"exit code 0"' },
    { name: 'a prefix (quarant*)', q: 'quarant*' },
    { name: 'an absent word (zzyzx)', q: 'zzyzx' },
  ];
  const port = await freePort();
  const server = spawn(process.execPath, serverNodeArgs(), {
    cwd: ROOT,
    env: { RATE_LIMIT_READS: 'off', ...process.env, DATABASE_URL: URL_, PORT: String(port), LOG_LEVEL: 'warn', SEARCH_INDEXER: 'false' },
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
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const get = (pathAndQuery: string) =>
      new Promise<number>((resolve, reject) => {
        http
          .get(`${base}${pathAndQuery}`, { agent, headers: { 'X-Access-Token': token } }, (response) => {
            response.on('data', () => undefined);
            response.on('end', () => resolve(response.statusCode ?? 0));
          })
          .on('error', reject);
      });
    const rows: string[] = [];
    const plans: string[] = [];
    for (const search of searches) {
      const hits = await frequency(search.q);
      const path = `/api/v1/search/events?q=${encodeURIComponent(search.q)}&limit=20`;
      for (let i = 0; i < 10; i++) await get(path);
      const times: number[] = [];
      for (let i = 0; i < REQUESTS; i++) {
        const started = performance.now();
        const status = await get(path);
        times.push(performance.now() - started);
        if (status !== 200) throw new Error(`${search.name}: ${status}`);
      }
      times.sort((a, b) => a - b);
      rows.push(`| ${search.name} | ${hits.toLocaleString('en')} | ${percentile(times, 50).toFixed(1)} | ${percentile(times, 99).toFixed(1)} |`);
      log(rows[rows.length - 1]!);
      const [text, values] = hitPageQuery(ownerId, parseSearchQuery(search.q), noFilter, 21);
      const plan = await q<{ 'QUERY PLAN': string }>(`explain (analyze, buffers) ${text}`, values);
      plans.push(`#### ${search.name}\n\n\`\`\`\n${plan.map((row) => row['QUERY PLAN']).join('\n')}\n\`\`\``);
    }
    const [size] = await q<{ table: string; gin: string; owner: string; pkey: string; total: string }>(
      `select pg_table_size('event_search')::text as table, pg_relation_size('event_search_lexemes_idx')::text as gin,
         pg_relation_size('event_search_owner_idx')::text as owner, pg_relation_size('event_search_pkey')::text as pkey,
         pg_total_relation_size('event_search')::text as total`,
    );
    // Last: the ingest below adds events the sizes above do not count.
    const sessionKey = generateSecret('session_api_key');
    await q(`insert into credentials (id, user_id, kind, secret_hash) values ($1, $2, 'session_api_key', $3)`, [randomUUID(), ownerId, hashSecret(sessionKey)]);
    const lag = await measureLag(base, sessionKey, token, indexer);
    const perMillion = (bytes: string) => `${((Number(bytes) / total!.n) * 1e6 / 2 ** 20).toFixed(0)} MiB`;
    console.log(`### Search benchmark, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC\n`);
    console.log(`\`npm run bench:search -- --events ${EVENTS}\`: ${EVENTS.toLocaleString('en')} events (${total!.n.toLocaleString('en')} indexed rows), ` +
      `${CONVERSATIONS.toLocaleString('en')} conversations of one user, ${REQUESTS} requests each (first page, limit 20), one connection, no other load` +
      (indexSeconds === undefined ? '' : `; indexed ${indexed.toLocaleString('en')} in ${indexSeconds.toFixed(0)} s (${Math.round(indexed / indexSeconds).toLocaleString('en')} events/s)`) + '.\n');
    console.log('| search | hits | p50 ms | p99 ms |\n|---|---|---|---|');
    for (const row of rows) console.log(row);
    console.log(`\nIndex size per million events: ${perMillion(size!.total)} in all — table with its TOAST ${perMillion(size!.table)}, ` +
      `GIN on lexemes ${perMillion(size!.gin)}, (owner, ordinal) ${perMillion(size!.owner)}, primary key ${perMillion(size!.pkey)}.\n`);
    console.log(`Indexing lag while ${LAG_CLIENTS} clients post batches of ${LAG_BATCH} events for ${LAG_SECONDS} s ` +
      `(${lag.events.toLocaleString('en')} events, ${Math.round(lag.events / LAG_SECONDS).toLocaleString('en')}/s), now − indexed_through sampled every 200 ms: ` +
      `p50 ${lag.p50} ms, p99 ${lag.p99} ms, max ${lag.max} ms.\n`);
    console.log(plans.join('\n\n'));
  } finally {
    server.kill('SIGTERM');
    knexClient.releaseConnection(pg);
    await database.close();
  }
}

await main();
