/**
 * Usage benchmark (issue 34): `GET /api/billing/usage` over 90 days for one user with
 * BENCH_USAGE_CONVERSATIONS (50,000) conversations, every one of them within those 90 days, beside
 * BENCH_USAGE_OTHERS (20) other users with 2,000 each. It seeds only what the usage read touches, at
 * full scale: users, conversations, their titles, `usage_daily` and its rollups (one row per conversation, day and
 * model: about a fifth of the conversations span two days, three in ten also call a second model) and
 * the spend ledger's `spend_entries` behind it (8 charges per row, adding up to its cost, so /spend
 * can be timed beside it). No events: the usage read never touches them (`npm run bench:read` times
 * those at 5,000,000). Then it times each grouping with BENCH_USAGE_REQUESTS (200) sequential
 * requests after 10 warm-up over a server it starts, prints a Markdown table of p50/p99, and the
 * EXPLAIN (ANALYZE, BUFFERS) of each statement as the server sends it.
 *
 *   BENCH_USAGE_DATABASE_URL=postgres://postgres@127.0.0.1:5432/benchusage npm run bench:usage
 *
 * With BENCH_USAGE_INFO_POSTS=N (0 skips it) it also times N sequential ConversationInfo posts
 * (`POST /api/v1/webhooks/conversations`, each a growing cost, tokens and calls of two usages), the
 * write that usage adds to; run the same on the commit before to compare. The public schema is
 * dropped and recreated unless it already holds a seed of the same size (BENCH_USAGE_RESEED=1 forces it).
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../src/config.ts';
import { openDatabase, migrate } from '../src/db/database.ts';
import { createLogger } from '../src/logger.ts';
import { generateSecret, hashSecret } from '../src/identity/secrets.ts';
import { freePort } from './lib/free-port.ts';
import { serverNodeArgs } from '../src/server-node-flags.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CONVERSATIONS = Number(process.env.BENCH_USAGE_CONVERSATIONS ?? 50_000);
const OTHERS = Number(process.env.BENCH_USAGE_OTHERS ?? 20);
const REQUESTS = Number(process.env.BENCH_USAGE_REQUESTS ?? 200);
const INFO_POSTS = Number(process.env.BENCH_USAGE_INFO_POSTS ?? 0);
const URL_ = process.env.BENCH_USAGE_DATABASE_URL ?? process.env.DATABASE_URL;
const EMAIL = 'bench-usage@example.com';
const DAY_MS = 86_400_000;

type Query = <T>(text: string, values?: unknown[]) => Promise<T[]>;

function log(message: string): void {
  process.stderr.write(`[bench:usage ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

async function main(): Promise<void> {
  if (!URL_) throw new Error('set BENCH_USAGE_DATABASE_URL (or DATABASE_URL) to a database of its own, e.g. …/benchusage');
  // The seed's inserts take longer than a request may.
  const config = loadConfig({ ...process.env, DATABASE_URL: URL_, LOG_LEVEL: 'warn', DB_QUERY_TIMEOUT_MS: '3600000' });
  const database = await openDatabase(config.database, createLogger('warn'));
  const knexClient = database.orm.em.getConnection().getKnex().client;
  const pg = await knexClient.acquireConnection();
  const q: Query = async <T>(text: string, values: unknown[] = []) => (await pg.query({ text, values })).rows as T[];

  const seeded = await q<{ n: number }>(
    `select (select count(*) from conversations c join users u on u.id = c.owner_id where u.email = '${EMAIL}')::int as n`,
  ).catch(() => [{ n: -1 }]);
  if (process.env.BENCH_USAGE_RESEED === '1' || seeded[0]!.n !== CONVERSATIONS) {
    await q('drop schema public cascade');
    await q('create schema public');
    await migrate(database.orm);
    await seed(q);
  } else {
    await migrate(database.orm);
    log(`reusing the seed of ${CONVERSATIONS} conversations`);
  }
  const [user] = await q<{ id: string }>(`select id from users where email = '${EMAIL}'`);
  const ownerId = user!.id;
  const token = generateSecret('access_token');
  const sessionKey = generateSecret('session_api_key');
  await q(`insert into credentials (id, user_id, kind, secret_hash) values ($1, $2, 'access_token', $3), ($4, $2, 'session_api_key', $5)`, [
    randomUUID(),
    ownerId,
    hashSecret(token),
    randomUUID(),
    hashSecret(sessionKey),
  ]);
  const today = Math.floor(Date.now() / DAY_MS) * DAY_MS;
  const since90 = new Date(today - 89 * DAY_MS).toISOString().slice(0, 10);
  const [rows] = await q<{ rows: number; conversations: number }>(
    `select count(*)::int as rows, count(distinct conversation_id)::int as conversations from usage_daily where owner_id = $1 and day >= $2::date`,
    [ownerId, since90],
  ).catch(() => [{ rows: 0, conversations: 0 }]); // a commit before usage has no usage_daily

  const usageQueries = await import('../src/usage/queries.ts').catch(() => undefined);
  const until = new Date(today + DAY_MS).toISOString().slice(0, 10);
  const range = { ownerId, since: since90, until };
  const reads: { name: string; path: string; sql?: [string, unknown[]][] }[] = usageQueries
    ? [
        ...(['day', 'model', 'member', 'conversation'] as const).map((groupBy) => ({
          name: `usage by ${groupBy}, 90 days`,
          path: `/api/billing/usage?group_by=${groupBy}&since=${since90}`,
          sql:
            groupBy === 'conversation'
              ? [usageQueries.usageConversationsQuery(range, 20)]
              : [usageQueries.usageGroupsQuery(groupBy, range, groupBy === 'day' ? 366 : 20)],
        })),
        { name: 'usage by day, default 30 days', path: '/api/billing/usage' },
      ]
    : [];
  reads.push({ name: 'for comparison: /spend by day, 90 days (spend_entries)', path: `/api/billing/spend?group_by=day&since=${since90}T00:00:00Z&limit=100` });

  const port = await freePort();
  const server = spawn(process.execPath, serverNodeArgs(), {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: URL_, PORT: String(port), LOG_LEVEL: 'warn' },
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
    const request = (method: string, pathAndQuery: string, headers: Record<string, string>, body?: string) =>
      new Promise<number>((resolve, reject) => {
        const outgoing = http.request(`${base}${pathAndQuery}`, { method, agent, headers }, (response) => {
          response.on('data', () => undefined);
          response.on('end', () => resolve(response.statusCode ?? 0));
        });
        outgoing.on('error', reject);
        outgoing.end(body);
      });
    const timed = async (name: string, count: number, send: (i: number) => Promise<number>, ok: number[]) => {
      for (let i = 0; i < Math.min(10, count); i++) await send(-1 - i);
      const times: number[] = [];
      for (let i = 0; i < count; i++) {
        const started = performance.now();
        const status = await send(i);
        times.push(performance.now() - started);
        if (!ok.includes(status)) throw new Error(`${name}: ${status}`);
      }
      times.sort((a, b) => a - b);
      const row = `| ${name} | ${percentile(times, 50).toFixed(1)} | ${percentile(times, 99).toFixed(1)} |`;
      log(row);
      return row;
    };
    const table: string[] = [];
    for (const read of reads) table.push(await timed(read.name, REQUESTS, () => request('GET', read.path, { 'X-Access-Token': token }), [200]));

    if (INFO_POSTS > 0) {
      // Growing infos over a pool of conversations, as runtimes post them: each post moves both usages.
      const pool = Array.from({ length: 50 }, () => randomUUID());
      const info = (i: number) => {
        const step = i + 20;
        const usage = (model: string, cost: number) => ({
          model_name: model,
          accumulated_cost: cost,
          max_budget_per_task: null,
          accumulated_token_usage: { model, prompt_tokens: step * 1000, completion_tokens: step * 100, cache_read_tokens: 0, cache_write_tokens: 0, reasoning_tokens: 0, context_window: 200000, per_turn_token: 1100, response_id: '' },
          costs: [],
          response_latencies: [],
          token_usages: Array.from({ length: Math.min(step, 50) }, (_, n) => ({ model, prompt_tokens: 1000, completion_tokens: 100, response_id: `r${n}` })),
        });
        return JSON.stringify({
          id: pool[(i + 50) % pool.length],
          title: 'Bench',
          execution_status: 'running',
          updated_at: new Date(Date.now() + i).toISOString(),
          metrics: null,
          stats: { usage_to_metrics: { agent: usage('anthropic/claude-sonnet-4-5', step * 0.0123457), condenser: usage('openai/gpt-4o-mini', step * 0.0001) } },
        });
      };
      const headers = { 'X-Session-API-Key': sessionKey, 'Content-Type': 'application/json' };
      table.push(await timed(`POST /api/v1/webhooks/conversations (growing info, 2 usages), ${INFO_POSTS} sequential`, INFO_POSTS, (i) => request('POST', '/api/v1/webhooks/conversations', headers, info(i)), [200, 201]));
    }

    const load = fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
    // How busy the machine was, in one number: a quiet core counts a million rows in about 60 ms.
    const counted = performance.now();
    await q('select count(*) from generate_series(1, 1000000)');
    const yardstick = performance.now() - counted;
    const [version] = await q<{ v: string }>("select current_setting('server_version') as v");
    console.log(`### Usage benchmark, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC\n`);
    console.log(
      `\`npm run bench:usage\`: one user of ${CONVERSATIONS.toLocaleString('en')} conversations, all within the last 90 days ` +
        `(${rows!.rows.toLocaleString('en')} usage rows of ${rows!.conversations.toLocaleString('en')} conversations in the range), beside ${OTHERS} users of 2,000; ` +
        `${REQUESTS} sequential requests per read after 10 warm-up (node:http, one kept-alive connection); PostgreSQL ${version!.v}, Node ${process.version}; ` +
        `load average after the run ${load}; \`select count(*) from generate_series(1, 1000000)\` took ${yardstick.toFixed(0)} ms.\n`,
    );
    console.log('| read | p50 ms | p99 ms |\n|---|---|---|');
    for (const row of table) console.log(row);
    console.log('\n#### Plans (EXPLAIN (ANALYZE, BUFFERS) of each statement, as the server sends it)\n');
    for (const read of reads) {
      for (const [text, values] of read.sql ?? []) {
        const plan = await q<{ 'QUERY PLAN': string }>(`explain (analyze, buffers) ${text}`, values);
        console.log(`${read.name}:\n\n\`\`\`\n${plan.map((row) => row['QUERY PLAN']).join('\n')}\n\`\`\`\n`);
      }
    }
  } finally {
    server.kill('SIGTERM');
    knexClient.releaseConnection(pg);
    await database.close();
  }
}

/** Users, conversations (all within the last 90 days), titles, usage rows and the charges behind them. */
async function seed(q: Query): Promise<void> {
  const t0 = performance.now();
  const ownerId = randomUUID();
  await q(`insert into users (id, email) values ($1, '${EMAIL}')`, [ownerId]);
  await q(`insert into users (id, email) select gen_random_uuid(), 'bench-usage-' || g || '@example.com' from generate_series(1, $1::int) g`, [OTHERS]);
  await q(
    `insert into conversations (id, owner_id, created_at, updated_at)
     select gen_random_uuid(), $1, now() - random() * interval '89 days', now() from generate_series(1, $2::int)`,
    [ownerId, CONVERSATIONS],
  );
  await q(
    `insert into conversations (id, owner_id, created_at, updated_at)
     select gen_random_uuid(), u.id, now() - random() * interval '89 days', now() from users u cross join generate_series(1, 2000) where u.id <> $1`,
    [ownerId],
  );
  log(`conversations in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
  const [usageTable] = await q<{ exists: boolean }>(`select to_regclass('usage_daily') is not null as exists`);
  if (!usageTable!.exists) return log('no usage_daily here (a commit before usage): conversations only, for the info-post timing');
  await q(
    `insert into conversation_infos (conversation_id, title, info)
     select id, to_json('Task #' || left(id::text, 8)), 'null'::json from conversations where owner_id = $1`,
    [ownerId],
  );
  // A conversation's usage on the day it started and, for one in five, the next (never after today);
  // its main model one of four, and in three of ten a condenser model besides.
  await q(`
    insert into usage_daily (owner_id, day, conversation_id, model_name, cost_micro_usd, tokens_in, tokens_out, llm_calls)
    select c.owner_id, d.day, c.id, m.model, (random() * 2000000)::bigint, (random() * 600000)::bigint, (random() * 30000)::bigint, 1 + (random() * 60)::bigint
    from conversations c
    cross join lateral (
      select (c.created_at at time zone 'UTC')::date as day
      union all
      select (c.created_at at time zone 'UTC')::date + 1 where abs(hashtext(c.id::text)) % 5 = 0 and (c.created_at at time zone 'UTC')::date < (now() at time zone 'UTC')::date
    ) d
    cross join lateral (
      select (array['anthropic/claude-sonnet-4-5', 'openai/gpt-5', 'gemini/gemini-2.5-pro', 'deepseek/deepseek-chat'])[1 + abs(hashtext(c.id::text || 'm')) % 4] as model
      union all
      select 'openai/gpt-4o-mini' where abs(hashtext(c.id::text || 'c')) % 10 < 3
    ) m`);
  log(`usage rows in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
  // The rollups the post's statement keeps, built from those rows as the migration's backfill builds them.
  const rollups = await import('../src/db/migrations/Migration20261127136000_usage_rollups.ts').catch(() => undefined);
  if (rollups) await q(rollups.usageRollupsBackfill());
  const memberRollups = await import('../src/db/migrations/Migration20261127211000_usage_members.ts').catch(() => undefined);
  if (memberRollups) await q(memberRollups.usageMemberRollupsBackfill());
  // Eight charges per usage row, adding up to its cost, at times within its day (the first takes the remainder).
  await q(`
    insert into spend_entries (owner_id, conversation_id, usage_id, model_name, amount_micro_usd, charged_at)
    select u.owner_id, u.conversation_id, 'agent', u.model_name, u.cost_micro_usd / 8 + case when k = 1 then u.cost_micro_usd % 8 else 0 end,
      (u.day::timestamp at time zone 'UTC') + (k * interval '2 hours') + random() * interval '1 hour'
    from usage_daily u cross join generate_series(1, 8) k
    where u.cost_micro_usd / 8 + case when k = 1 then u.cost_micro_usd % 8 else 0 end > 0`);
  await q(`insert into spend_totals (owner_id, spent_micro_usd) select owner_id, sum(amount_micro_usd) from spend_entries group by 1`);
  const tables = ['conversations', 'conversation_infos', 'usage_daily', 'spend_entries', 'spend_totals'];
  if (rollups) tables.push('usage_conversations', 'usage_conversation_models', 'usage_owner_days', 'usage_model_days');
  if (memberRollups) tables.push('usage_conversation_members', 'usage_member_days');
  for (const table of tables) await q(`vacuum analyze ${table}`);
  log(`seeded in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
}

await main();
