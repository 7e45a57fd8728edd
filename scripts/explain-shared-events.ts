/**
 * The plans of a shared conversation's reads beside the owner's (docs/sharing.md, "How fast"): in one
 * transaction that is rolled back, seeds a conversation of EXPLAIN_SHARED_EVENTS events (default
 * 200,000; a quarter of them kinds a link hides, the mix of a real run) among 42 others (1.4 M events), then prints EXPLAIN (ANALYZE, BUFFERS) of the statements the services run, built by the
 * same functions (`eventPageQuery`):
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/scratch npx tsx scripts/explain-shared-events.ts
 *
 * The database must be migrated (`npm start` on it once, or a test run); nothing is left in it.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { eventPageQuery } from '../src/conversations/queries.ts';
import { eventFilterOf } from '../src/conversations/search.ts';
import { hashSecret } from '../src/identity/secrets.ts';
import { SHOWN_KINDS } from '../src/sharing/visibility.ts';

const EVENTS = Number(process.env.EXPLAIN_SHARED_EVENTS ?? 200_000);
const url = process.env.DATABASE_URL;
if (!url) throw new Error('set DATABASE_URL to a migrated scratch database');

/** A step of a run: message, action, observation, state update, completion log, token event… */
const MIX = ['MessageEvent', 'ActionEvent', 'ObservationEvent', 'ConversationStateUpdateEvent', 'ActionEvent', 'ObservationEvent', 'LLMCompletionLogEvent', 'HookExecutionEvent'];

const client = new pg.Client({ connectionString: url });
await client.connect();
try {
  await client.query('begin');
  const owner = randomUUID();
  await client.query('insert into users (id, email) values ($1, $2)', [owner, `explain-${owner}@example.com`]);
  // The shared one (second) among others as large and 40 smaller ones, so that it is a small part of the table.
  const conversations = [randomUUID(), randomUUID(), randomUUID(), ...Array.from({ length: 40 }, () => randomUUID())];
  for (const [i, id] of conversations.entries()) {
    const events = i < 3 ? EVENTS : Math.ceil(EVENTS / 10);
    await client.query('insert into conversations (id, owner_id) values ($1, $2)', [id, owner]);
    await client.query(
      `insert into conversation_events (conversation_id, seq, event_id, kind, payload, event_time, source)
       select $1, n, 'e' || n, ($2::text[])[1 + n % $3], ('{"kind":"' || ($2::text[])[1 + n % $3] || '","n":' || n || '}')::json,
              now() - make_interval(secs => $4 - n), 'agent'
       from generate_series(1, $4) n`,
      [id, MIX, MIX.length, events],
    );
    await client.query('update conversations set event_count = $2 where id = $1', [id, events]);
  }
  const token = `apsh_${'A'.repeat(43)}`;
  await client.query("insert into share_links (id, conversation_id, token_hash, token_hint, created_by) values ($1, $2, $3, 'apsh_AAAA', $4)", [randomUUID(), conversations[1], hashSecret(token), owner]);
  // Other links around it, so that the planner probes the token index as on a busy server.
  await client.query(
    `insert into share_links (id, conversation_id, token_hash, token_hint, created_by)
     select gen_random_uuid(), $1, encode(sha256(n::text::bytea), 'hex'), 'apsh_' || n, $2 from generate_series(1, 10000) n`,
    [conversations[0], owner],
  );
  await client.query('analyze conversation_events');
  await client.query('analyze share_links');

  const id = conversations[1]!;
  const all = eventFilterOf({});
  const shown = { ...all, kinds: [...SHOWN_KINDS].sort() };
  const plans: [string, [string, unknown[]]][] = [
    ["the link's token → its conversation", ['select conversation_id, share_tags, expires_at from share_links where token_hash = $1 and revoked_at is null and (expires_at is null or expires_at > now())', [hashSecret(token)]]],
    ["owner's newest page (order=desc, limit=100)", eventPageQuery(id, all, 'desc', 101)],
    ["owner's newest page of two kinds (kind=MessageEvent&kind=ActionEvent)", eventPageQuery(id, { ...all, kinds: ['ActionEvent', 'MessageEvent'] }, 'desc', 101)],
    ['shared newest page (order=desc, limit=100)', eventPageQuery(id, shown, 'desc', 101)],
    ["owner's page 1000 events back (before_seq)", eventPageQuery(id, { ...all, beforeSeq: EVENTS - 1000 }, 'desc', 101)],
    ['shared page 1000 events back (before_seq)', eventPageQuery(id, { ...shown, beforeSeq: EVENTS - 1000 }, 'desc', 101)],
    ['shared oldest page (order=asc, limit=100)', eventPageQuery(id, shown, 'asc', 101)],
  ];
  for (const [title, [text, values]] of plans) {
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(`explain (analyze, buffers, costs off) ${text}`, values);
    console.log(`\n### ${title}\n`);
    for (const row of rows) console.log(`    ${row['QUERY PLAN']}`);
  }
} finally {
  await client.query('rollback').catch(() => undefined);
  await client.end();
}
