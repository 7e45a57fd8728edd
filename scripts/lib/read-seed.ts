import { randomUUID } from 'node:crypto';
import { isoInstant } from '../../src/conversations/event-time.ts';
import { jsonArray } from '../../src/conversations/queries.ts';

/** The read benchmark's database (scripts/bench-read.ts), shared with the search benchmark (scripts/bench-search.ts). */

export type MakeBatch = (n: number, seed: number) => Record<string, unknown>[];

const TITLE_WORDS = ['parser', 'billing', 'export', 'login', 'flaky', 'cache', 'search', 'deploy', 'timeout', 'docs', 'upgrade', 'refactor'];

function log(message: string): void {
  process.stderr.write(`[seed ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

/**
 * The seed: `events` events over `conversations` conversations of one user, the big one first (`big`
 * events), through `ingest_event_batches` as the webhook stores them; `decorate` may change each event
 * (its position in the seed given) before it is stored.
 */
export async function seedReadDatabase(
  q: <T>(text: string, values?: unknown[]) => Promise<T[]>,
  makeBatch: MakeBatch,
  seedSize: { events: number; conversations: number; big: number },
  decorate?: (event: Record<string, unknown>, position: number) => void,
): Promise<void> {
  const { events: EVENTS, conversations: CONVERSATIONS, big: BIG } = seedSize;
  const ownerId = randomUUID();
  await q(`insert into users (id, email) values ($1, 'bench-read@example.com')`, [ownerId]);
  const pool: Record<string, unknown>[] = [];
  for (let seed = 1; pool.length < 20_000; seed++) pool.push(...makeBatch(100, seed));
  const small = CONVERSATIONS - 1;
  const perSmall = Math.floor((EVENTS - BIG) / small);
  const extra = EVENTS - BIG - perSmall * small;
  const counts = [BIG, ...Array.from({ length: small }, (_, i) => perSmall + (i < extra ? 1 : 0))];
  const ids = counts.map(() => randomUUID());
  const start = Date.UTC(2026, 0, 1);
  let cursor = 0;
  let done = 0;
  const t0 = performance.now();
  const call = async (groups: { conversation: string; from: number; n: number }[]) => {
    const eventIds: string[] = [];
    const kinds: string[] = [];
    const times: (string | null)[] = [];
    const sources: (string | null)[] = [];
    const batches: number[] = [];
    const payloads: Buffer[] = [];
    groups.forEach((group, g) => {
      for (let k = 0; k < group.n; k++) {
        const template = pool[cursor++ % pool.length]!;
        const event: Record<string, unknown> & { id: string; timestamp: string } = { ...template, id: randomUUID(), timestamp: new Date(start + (group.from + k) * 1000).toISOString().replace('Z', '') };
        decorate?.(event, done + eventIds.length);
        eventIds.push(event.id);
        kinds.push(event.kind as string);
        times.push(isoInstant(event.timestamp));
        sources.push((event.source as string | undefined) ?? null);
        batches.push(g + 1);
        payloads.push(Buffer.from(JSON.stringify(event)));
      }
    });
    await q(`select * from ingest_event_batches($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`, [
      groups.map((g) => g.conversation),
      groups.map(() => ownerId),
      batches,
      eventIds,
      kinds,
      kinds.map(() => null),
      jsonArray(payloads),
      [],
      [],
      times,
      sources,
    ]);
    done += eventIds.length;
  };
  // Conversations are created in order, so created_at increases with the index.
  for (let from = 0; from < BIG; from += 2000) await call([{ conversation: ids[0]!, from, n: Math.min(2000, BIG - from) }]);
  log(`big conversation: ${BIG} events in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
  let group: { conversation: string; from: number; n: number }[] = [];
  let size = 0;
  for (let i = 1; i < ids.length; i++) {
    group.push({ conversation: ids[i]!, from: 0, n: counts[i]! });
    size += counts[i]!;
    if (size >= 2000 || i === ids.length - 1) {
      await call(group);
      group = [];
      size = 0;
      if (i % 5000 < 25) log(`${done} events, ${i + 1} conversations, ${((performance.now() - t0) / 1000).toFixed(0)} s`);
    }
  }
  // Titles: a few words each; `flaky` in about one in twelve.
  await q(`
    with titled as (
      select id, initcap((array['${TITLE_WORDS.join("','")}'])[1 + (abs(hashtext(id::text)) % ${TITLE_WORDS.length})]) || ' ' ||
        (array['fix','investigate','improve','document'])[1 + (abs(hashtext(id::text || 'x')) % 4)] || ' #' || (abs(hashtext(id::text)) % 10000) as title
      from conversations
    )
    insert into conversation_infos (conversation_id, title, info)
    select id, to_json(title), json_build_object('id', id, 'title', title) from titled`);
  await q(`update conversations c set title_search = i.title #>> '{}' from conversation_infos i where i.conversation_id = c.id`);
  await q('vacuum analyze conversation_events');
  await q('vacuum analyze conversations');
  await q('vacuum analyze conversation_infos');
  log(`seeded ${done} events in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
}

