/**
 * What the outbound-webhook triggers cost the webhook's write (issue 21), in the database alone:
 * `ingest_event_batches` called with groups of `GROUP` one-event batches (distinct conversations),
 * `ROUNDS` times, for a user without endpoints with the triggers disabled, the same with them
 * enabled, and with 10 endpoints subscribed to `conversation.events`. Prints ms per group.
 * Run on a scratch database only (it creates a user and conversations, and alters triggers):
 *
 *   DATABASE_URL=postgres://…/scratch npx tsx scripts/measure-outbound-trigger.ts
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/db/database.ts';
import { createLogger } from '../src/logger.ts';

const GROUP = Number(process.env.GROUP ?? 8);
const ROUNDS = Number(process.env.ROUNDS ?? 1500);
const config = loadConfig();
const database = await openDatabase(config.database, createLogger('warn'));
await database.close();
const client = new pg.Client({ connectionString: database.url });
await client.connect();

async function run(label: string, owner: string): Promise<void> {
  const started = performance.now();
  for (let r = 0; r < ROUNDS; r++) {
    const conversations = Array.from({ length: GROUP }, () => randomUUID()).sort();
    const payloads = conversations.map(() => JSON.stringify({ kind: 'PauseEvent', id: randomUUID(), source: 'user' }));
    await client.query({
      name: 'ingest',
      text: 'select batch, owner_id, stored from ingest_event_batches($1, $2, $3, $4, $5, $6, $7, $8, $9)',
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
      ],
    });
  }
  const ms = performance.now() - started;
  console.log(`${label}: ${(ms / ROUNDS).toFixed(3)} ms per group of ${GROUP} batches (${ROUNDS} groups)`);
}

const owner = randomUUID();
await client.query(`insert into users (id, email) values ($1, $2)`, [owner, `${owner}@measure.example`]);
await client.query('alter table conversations disable trigger webhook_conversation_created');
await client.query('alter table conversations disable trigger webhook_conversation_updated');
await run('warm-up', owner);
await run('triggers disabled', owner);
await client.query('alter table conversations enable trigger webhook_conversation_created');
await client.query('alter table conversations enable trigger webhook_conversation_updated');
await run('triggers enabled, no endpoints', owner);
for (let i = 0; i < 10; i++) {
  await client.query(
    `insert into webhook_endpoints (id, owner_id, url, event_types, secret) values ($1, $2, 'https://sink.example/', '{conversation.events}', 'x')`,
    [randomUUID(), owner],
  );
}
await run('10 endpoints on conversation.events', owner);
await client.query('delete from webhook_endpoints where owner_id = $1', [owner]);
await client.query(`delete from pgboss.job where name = 'webhook-delivery'`);
await client.end();
