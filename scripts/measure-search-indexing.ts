/**
 * What indexing costs per event (issue 35, docs/search.md "What indexing costs"): seeds a database of
 * its own with a realistic mix (the shared bench kit's events, one in ten from the agent-server
 * fixtures in test/fixtures/agent-server/), then runs the SearchIndexer's `catchUp` and reports events/s,
 * CPU per 1,000 events in Node (process.cpuUsage) and in PostgreSQL (the backends' CPU from /proc, so the
 * database must run on this machine), the wall time of each statement, the extraction's phases alone,
 * and the bytes of `event_search` per event.
 *
 *   MEASURE_DATABASE_URL=postgres://postgres@127.0.0.1:5432/measureindexing npm run measure:indexing -- --events 20000
 *
 * `--events N` (default 20,000), `--profile FILE` writes a CPU profile of the catchUp alone (open it in
 * Chrome's DevTools; its heaviest functions are printed). The public schema is dropped and recreated.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Session } from 'node:inspector/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { loadConfig } from '../src/config.ts';
import { migrate, openDatabase } from '../src/db/database.ts';
import { createLogger } from '../src/logger.ts';
import { SearchIndexer } from '../src/search/indexer.ts';
import * as searchText from '../src/search/text.ts';
import { seedReadDatabase, type MakeBatch } from './lib/read-seed.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const KIT = process.env.BENCH_KIT
  ? path.resolve(ROOT, process.env.BENCH_KIT)
  : [path.resolve(ROOT, '../shared/bench'), path.resolve(ROOT, '../../shared/bench')].find((dir) => fs.existsSync(dir))!;
const { values: args } = parseArgs({ options: { events: { type: 'string' }, profile: { type: 'string' } } });
const EVENTS = Number(args.events ?? 20_000);
const URL_ = process.env.MEASURE_DATABASE_URL ?? process.env.DATABASE_URL;
/** One event in FIXTURE_EVERY comes from the agent-server fixtures (every kind the SDK sends, non-ASCII text). */
const FIXTURE_EVERY = 10;

function log(message: string): void {
  process.stderr.write(`[measure:indexing ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

/** The kit's batches with one event in FIXTURE_EVERY replaced by an agent-server fixture, in turn. */
function mixedBatches(kit: MakeBatch): MakeBatch {
  const dir = path.join(ROOT, 'test/fixtures/agent-server');
  const fixtures = ['events.json', 'events-newer.json'].flatMap((file) => JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8')) as Record<string, unknown>[]);
  let next = 0;
  return (n, seed) => kit(n, seed).map((event, i) => (i % FIXTURE_EVERY === FIXTURE_EVERY - 1 ? { ...fixtures[next++ % fixtures.length]!, id: event.id } : event));
}

/** CPU seconds (user + system) of a process, from /proc (clock ticks of 10 ms). */
function processCpuMs(pid: number): number {
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return 0;
  }
}

/** Wall time of each statement the pg driver runs, by what it does. */
class StatementTimes {
  readonly ms = new Map<string, number>();
  /** Statements are counted only while the catchUp runs. */
  active = false;

  install(): void {
    const times = this;
    const original = pg.Client.prototype.query as (...a: unknown[]) => unknown;
    (pg.Client.prototype as { query: unknown }).query = function (this: pg.Client, ...a: unknown[]) {
      const config = a[0] as { text?: string } | string;
      const text = typeof config === 'string' ? config : (config.text ?? '');
      const started = performance.now();
      const result = original.apply(this, a);
      const done = () => times.add(text, performance.now() - started);
      if (!times.active) return result;
      if (result instanceof Promise) void result.then(done, () => undefined);
      // A COPY: its stream finishes when the server has taken the rows.
      else if (result && typeof (result as { once?: unknown }).once === 'function') (result as NodeJS.EventEmitter).once('finish', done);
      return result;
    };
  }

  private add(text: string, ms: number): void {
    const name = /insert into event_search|copy event_search/.test(text) ? 'insert index rows'
      : /join conversation_events e on e.conversation_id = r.id/.test(text) ? 'read pending events'
      : /update conversations c set search_from/.test(text) ? 'move marks'
      : /search_from is not null/.test(text) ? 'pending ranges'
      : /advisory/.test(text) ? 'advisory lock'
      : /^\s*(begin|commit|rollback|savepoint|release)/i.test(text) ? 'begin/commit'
      : 'other';
    this.ms.set(name, (this.ms.get(name) ?? 0) + ms);
  }
}

async function main(): Promise<void> {
  if (!URL_) throw new Error('set MEASURE_DATABASE_URL (or DATABASE_URL) to a database of its own: its public schema is dropped');
  const { makeBatch } = (await import(path.join(KIT, 'events.mjs'))) as { makeBatch: MakeBatch };
  const config = loadConfig({ ...process.env, DATABASE_URL: URL_, LOG_LEVEL: 'warn' });
  const database = await openDatabase(config.database, createLogger('warn'));
  const knexClient = database.orm.em.getConnection().getKnex().client;
  const own = await knexClient.acquireConnection();
  const q = async <T>(text: string, values: unknown[] = []): Promise<T[]> => (await own.query({ text, values })).rows as T[];

  await q('set statement_timeout = 0');
  await q('drop schema public cascade');
  await q('create schema public');
  await migrate(database.orm);
  const seedStarted = performance.now();
  await seedReadDatabase(q, mixedBatches(makeBatch), { events: EVENTS, conversations: Math.max(2, Math.round(EVENTS / 100)), big: Math.round(EVENTS / 10) });
  log(`seeded ${EVENTS} events in ${((performance.now() - seedStarted) / 1000).toFixed(0)} s`);

  const times = new StatementTimes();
  times.install();
  const indexer = new SearchIndexer(database.orm.em, { intervalMs: 100, batchEvents: config.search.batchEvents }, createLogger('warn'));
  const backends = async () => (await q<{ pid: number }>('select pid from pg_stat_activity where datname = current_database()')).map((row) => row.pid);
  const backendCpu = (pids: number[]) => new Map(pids.map((pid) => [pid, processCpuMs(pid)]));
  const profiler = args.profile ? new Session() : undefined;
  if (profiler) {
    profiler.connect();
    await profiler.post('Profiler.enable');
    await profiler.post('Profiler.setSamplingInterval', { interval: 200 });
    await profiler.post('Profiler.start');
  }
  const cpuBefore = backendCpu(await backends());
  const nodeBefore = process.cpuUsage();
  const started = performance.now();
  times.active = true;
  const indexed = await indexer.catchUp();
  times.active = false;
  const wallMs = performance.now() - started;
  const node = process.cpuUsage(nodeBefore);
  const cpuAfter = backendCpu(await backends());
  const pgMs = [...cpuAfter].reduce((sum, [pid, ms]) => sum + ms - (cpuBefore.get(pid) ?? 0), 0);
  if (profiler) {
    const { profile } = await profiler.post('Profiler.stop');
    fs.writeFileSync(args.profile!, JSON.stringify(profile));
    printProfile(profile);
  }
  // GIN's pending list (fastupdate) is merged by vacuum: its cost belongs to indexing too.
  const [vacuumPid] = await q<{ pid: number }>('select pg_backend_pid() as pid');
  const vacuumCpuBefore = processCpuMs(vacuumPid!.pid);
  const vacuumStarted = performance.now();
  await q('vacuum analyze event_search');
  const vacuumMs = performance.now() - vacuumStarted;
  const vacuumCpu = processCpuMs(vacuumPid!.pid) - vacuumCpuBefore;

  const per1000 = (ms: number) => ((ms / indexed) * 1000).toFixed(0);
  const [size] = await q<Record<string, string>>(
    `select pg_total_relation_size('event_search')::text as total, pg_relation_size('event_search')::text as heap,
       pg_table_size('event_search')::text as heap_and_toast,
       coalesce((select sum(pg_relation_size(indexrelid)) from pg_index where indrelid = 'event_search'::regclass), 0)::text as indexes,
       (select avg(pg_column_size(lexemes)) from event_search)::numeric(10,1)::text as vector_bytes,
       (select avg(length(lexemes)) from event_search)::numeric(10,1)::text as lexemes`,
  );
  const indexes = await q<{ name: string; bytes: string }>(
    `select c.relname as name, pg_relation_size(i.indexrelid)::text as bytes from pg_index i join pg_class c on c.oid = i.indexrelid
     where i.indrelid = 'event_search'::regclass order by 1`,
  );
  const perEvent = (bytes: string) => (Number(bytes) / indexed).toFixed(0);

  // The extraction alone, on the same payloads, phase by phase (CPU of this process; the JIT is warm by now).
  const payloads = (await q<{ payload: string }>('select payload::text as payload from conversation_events order by received_at, conversation_id, seq')).map((row) => row.payload);
  const cpu = (work: () => void) => {
    const before = process.cpuUsage();
    work();
    const used = process.cpuUsage(before);
    return (used.user + used.system) / 1000;
  };
  let sink = 0;
  const parseMs = cpu(() => { for (const p of payloads) sink += (JSON.parse(p) as object) ? 1 : 0; });
  const texts: string[] = [];
  const textMs = cpu(() => { for (const p of payloads) texts.push(searchText.eventText(JSON.parse(p) as Record<string, unknown>)); }) - parseMs;
  let literal = 0;
  const vectorMs = cpu(() => { for (const t of texts) literal += searchText.indexVector(t).length; });
  // What the indexer makes since it writes by COPY: the lexemes, no literal (absent before).
  const lexemesOf = (searchText as { indexLexemes?: (text: string) => Map<string, number[]> }).indexLexemes;
  const lexemesMs = lexemesOf ? cpu(() => { for (const t of texts) sink += lexemesOf(t).size; }) : undefined;

  const [load] = fs.readFileSync('/proc/loadavg', 'utf8').split(' ');
  const statements = [...times.ms].sort((a, b) => b[1] - a[1]).map(([name, ms]) => `${name} ${per1000(ms)}`).join(', ');

  console.log(`### Indexing cost, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC\n`);
  console.log(`\`npm run measure:indexing -- --events ${EVENTS}\` (${indexed.toLocaleString('en')} events indexed, batches of ${config.search.batchEvents}; load average ${load} at the end)\n`);
  console.log('| measure | value |\n|---|---|');
  console.log(`| events/s (catchUp wall) | ${Math.round(indexed / (wallMs / 1000)).toLocaleString('en')} |`);
  console.log(`| Node CPU ms per 1,000 events | ${per1000((node.user + node.system) / 1000)} |`);
  console.log(`| PostgreSQL CPU ms per 1,000 events (backends) | ${per1000(pgMs)} |`);
  console.log(`| vacuum of event_search after: wall ms, CPU ms per 1,000 events | ${per1000(vacuumMs)}, ${per1000(vacuumCpu)} |`);
  console.log(`| SQL wall ms per 1,000 events, by statement | ${statements} |`);
  console.log(`| extraction alone, CPU ms per 1,000 events | JSON.parse ${per1000(parseMs)}, eventText ${per1000(textMs)}, indexVector (literal) ${per1000(vectorMs)}${lexemesMs === undefined ? '' : `, indexLexemes ${per1000(lexemesMs)}`} |`);
  console.log(`| tsvector per event: lexemes, bytes stored, literal chars | ${size!.lexemes}, ${size!.vector_bytes}, ${(literal / texts.length).toFixed(0)} |`);
  console.log(`| event_search bytes per event: total, table+TOAST, indexes | ${perEvent(size!.total!)}, ${perEvent(size!.heap_and_toast!)}, ${perEvent(size!.indexes!)} |`);
  console.log(`| per index, bytes per event | ${indexes.map((index) => `${index.name} ${perEvent(index.bytes)}`).join(', ')} |`);
  if (sink < 0) console.log(sink);
  knexClient.releaseConnection(own);
  await database.close();
}

interface ProfileNode { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }

/** The profile's heaviest functions by self time. */
function printProfile(profile: { nodes: ProfileNode[]; samples?: number[]; timeDeltas?: number[] }): void {
  const self = new Map<number, number>();
  (profile.samples ?? []).forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas?.[i] ?? 0)));
  const byFunction = new Map<string, number>();
  let total = 0;
  for (const node of profile.nodes) {
    const us = self.get(node.id) ?? 0;
    total += us;
    const { functionName, url, lineNumber } = node.callFrame;
    const key = `${functionName || '(anonymous)'} ${url.replace(/^.*\/(node_modules|src|scripts)\//, '$1/')}:${lineNumber + 1}`;
    byFunction.set(key, (byFunction.get(key) ?? 0) + us);
  }
  log(`CPU profile of the catchUp: ${(total / 1000).toFixed(0)} ms sampled; by self time:`);
  for (const [key, us] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, 30)) {
    log(`  ${((us / total) * 100).toFixed(1).padStart(5)} %  ${(us / 1000).toFixed(0).padStart(6)} ms  ${key}`);
  }
}

await main();
