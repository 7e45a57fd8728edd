/**
 * What the outbound-webhook triggers cost the webhook's write (issue 21), in the database alone:
 * `ingest_event_batches` called with groups of `GROUP` one-event batches (distinct conversations),
 * alternating group by group between a user without endpoints and a user with 10 endpoints
 * subscribed to `conversation.events`, `ROUNDS` groups each; every group is timed alone, so both
 * share the machine's load (on a shared machine, phase by phase they do not). Prints the median
 * and the mean of the middle 80 % of the groups' times, and the ratio of the medians.
 *
 * With `BEFORE_DATABASE_URL` (a scratch database already migrated by an earlier version of the
 * code, e.g. main before the fan-out), each round also ingests one group for each user there, so
 * that before and after are measured in one run, alternating. Run on scratch databases only (it creates a user,
 * conversations, endpoints and unconsumed jobs, and deletes the latter two at the end):
 *
 *   DATABASE_URL=postgres://…/scratch [BEFORE_DATABASE_URL=postgres://…/scratch_before] \
 *     npx tsx scripts/measure-outbound-trigger.ts
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/db/database.ts';
import { createLogger } from '../src/logger.ts';

const GROUP = Number(process.env.GROUP ?? 8);
const ROUNDS = Number(process.env.ROUNDS ?? 2000);
const config = loadConfig();
const database = await openDatabase(config.database, createLogger('warn'));
await database.close();

interface Target {
  name: string;
  url: string;
  client: pg.Client;
  owners: { none: string; ten: string };
}

async function user(client: pg.Client): Promise<string> {
  const id = randomUUID();
  await client.query(`insert into users (id, email) values ($1, $2)`, [id, `${id}@measure.example`]);
  return id;
}

async function target(name: string, url: string): Promise<Target> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const owners = { none: await user(client), ten: await user(client) };
  for (let i = 0; i < 10; i++) {
    await client.query(
      `insert into webhook_endpoints (id, owner_id, url, event_types, secret) values ($1, $2, 'https://sink.example/', '{conversation.events}', 'x')`,
      [randomUUID(), owners.ten],
    );
  }
  return { name, client, owners, url };
}

/** Ms to ingest one group of `GROUP` one-event batches of new conversations of `owner`. */
async function group(client: pg.Client, owner: string): Promise<number> {
  const conversations = Array.from({ length: GROUP }, () => randomUUID()).sort();
  const payloads = conversations.map(() => JSON.stringify({ kind: 'PauseEvent', id: randomUUID(), source: 'user' }));
  const started = performance.now();
  await client.query({
    name: 'ingest',
    text: 'select batch, owner_id, stored from ingest_event_batches($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)',
    values: [
      conversations,
      conversations.map(() => owner),
      conversations.map((_, i) => i + 1),
      payloads.map((p) => JSON.parse(p).id),
      conversations.map(() => 'PauseEvent'),
      conversations.map(() => null),
      `[${payloads.join(',')}]`,
      [],
      [],
      conversations.map(() => new Date().toISOString()),
      conversations.map(() => 'user'),
    ],
  });
  return performance.now() - started;
}

const targets = [await target('after', database.url)];
if (process.env.BEFORE_DATABASE_URL) targets.unshift(await target('before', process.env.BEFORE_DATABASE_URL));
const times = new Map<string, number[]>();
const label = (t: Target, phase: 'none' | 'ten') => `${t.name}, ${phase === 'ten' ? '10 endpoints on conversation.events' : 'no endpoints'}`;
for (let r = 0; r < 500; r++) for (const t of targets) for (const phase of ['none', 'ten'] as const) await group(t.client, t.owners[phase]); // warm-up
// Statistics of non-empty tables, then new sessions: the ingest function's plans, which PL/pgSQL
// keeps per session, are not made on a fresh database's empty-table estimates (seen 10× slower).
for (const t of targets) {
  await t.client.query('analyze');
  await t.client.end();
  t.client = new pg.Client({ connectionString: t.url });
  await t.client.connect();
}
for (let r = 0; r < ROUNDS; r++) {
  // Which goes first changes every round, so that neither always follows the other.
  const order = r % 2 === 0 ? (['none', 'ten'] as const) : (['ten', 'none'] as const);
  for (const t of targets) {
    for (const phase of order) {
      const key = label(t, phase);
      const ms = await group(t.client, t.owners[phase]);
      times.set(key, [...(times.get(key) ?? []), ms]);
    }
  }
}
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;
const trimmedMean = (v: number[]) => {
  const sorted = [...v].sort((a, b) => a - b).slice(Math.floor(v.length * 0.1), Math.ceil(v.length * 0.9));
  return sorted.reduce((a, b) => a + b, 0) / sorted.length;
};
console.log(`${ROUNDS} groups of ${GROUP} one-event batches per line, alternating group by group:`);
for (const [key, values] of times) {
  console.log(`  ${key}: median ${median(values).toFixed(3)} ms per group, trimmed mean ${trimmedMean(values).toFixed(3)} ms`);
}
for (const t of targets) {
  const none = times.get(label(t, 'none'))!;
  const ten = times.get(label(t, 'ten'))!;
  console.log(`  ${t.name}: 10 endpoints / none = ${(median(ten) / median(none)).toFixed(3)} (medians), ${(trimmedMean(ten) / trimmedMean(none)).toFixed(3)} (trimmed means)`);
  await t.client.query('delete from webhook_endpoints where owner_id = $1', [t.owners.ten]);
  await t.client.query(`delete from pgboss.job where name = 'webhook-delivery'`);
  await t.client.end();
}
