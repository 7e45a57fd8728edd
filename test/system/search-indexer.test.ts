import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { minimalEvent } from '../fixtures/events.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { describeRun, killAllProcesses, startServerProcess, stopWith, waitFor, type ServerProcess } from '../helpers/server-process.ts';
import { webhookPath } from '../helpers/webhook.ts';

/**
 * The search indexer in real server processes on the test database: SIGKILLed while it indexes, then
 * restarted as two instances at once; the index ends complete, each event in it once, and at the kill
 * every conversation's index held a prefix of its events, with its mark at or behind that prefix's end.
 */
describe('search indexer (server processes on one database)', function () {
  this.timeout(180_000);

  let user: UserFixture;
  beforeEach(async () => {
    user = await createUserFixture();
  });
  afterEach(async () => {
    await killAllProcesses();
  });

  const start = (env: Record<string, string>) =>
    startServerProcess({ ...process.env, DATABASE_URL: testDatabase().url, LOG_LEVEL: 'info', CREDENTIAL_CACHE_TTL_MS: '0', ...env }, { readyWithinMs: 90_000 });

  const sql = async <T>(text: string, values: unknown[] = []): Promise<T[]> => (await testDatabase().orm.em.getConnection().execute(text, values)) as T[];

  async function deliver(server: ServerProcess, conversationId: string, batch: unknown[]): Promise<void> {
    const response = await fetch(`${server.baseUrl}${webhookPath(conversationId)}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Session-API-Key': user.sessionApiKey },
      body: JSON.stringify(batch),
    });
    expect(response.status, await response.text()).to.equal(200);
  }

  /** This test's index rows only: processes of earlier tests may still be stopping on the same database. */
  const indexedCount = async () => (await sql<{ n: number }>('select count(*)::integer as n from event_search where owner_id = ?', [user.userId]))[0]!.n;

  it('SIGKILL while indexing loses no event: each index is a prefix its mark does not pass, and completes after restart', async () => {
    const ingesting = await start({ SEARCH_INDEXER: 'false' });
    const conversations = Array.from({ length: 4 }, () => randomUUID());
    const total = 1600;
    for (let b = 0; b < total / 50; b++) {
      const batch = Array.from({ length: 50 }, (_, i) =>
        minimalEvent('MessageEvent', {
          id: randomUUID(),
          source: 'agent',
          llm_message: { role: 'assistant', content: [{ type: 'text', text: `crashword batch ${b} event ${i} ${'filler '.repeat(40)}` }] },
        }),
      );
      await deliver(ingesting, conversations[b % conversations.length]!, batch);
    }
    expect(await indexedCount()).to.equal(0);

    // Five events a transaction: hundreds of transactions, so the kill lands in the middle.
    const indexing = await start({ SEARCH_INDEX_BATCH_EVENTS: '5', SEARCH_INDEX_INTERVAL_MS: '10' });
    expect(await waitFor(async () => (await indexedCount()) >= 100, 60_000), describeRun(indexing)).to.equal(true);
    await stopWith(indexing, 'SIGKILL');
    const atKill = await indexedCount();
    expect(atKill, 'killed mid-way').to.be.lessThan(total);

    // The index is its own watermark: events 1 … top, each once; the mark is a lower bound of what follows (all done when cleared).
    const marks = await sql<{ id: string; search_from: number | null; event_count: number; indexed: number; top: number | null }>(
      `select c.id, c.search_from, c.event_count, count(s.seq)::integer as indexed, max(s.seq) as top
       from conversations c left join event_search s on s.conversation_id = c.id where c.owner_id = ? group by c.id`,
      [user.userId],
    );
    for (const mark of marks) {
      expect(mark.indexed, `conversation ${mark.id}`).to.equal(mark.top ?? 0);
      expect((mark.search_from ?? mark.event_count + 1) - 1, `conversation ${mark.id}`).to.be.at.most(mark.top ?? 0);
    }

    // Two instances restart indexing at once: one indexes at a time, nothing twice.
    const [first, second] = await Promise.all([start({ SEARCH_INDEX_BATCH_EVENTS: '50' }), start({ SEARCH_INDEX_BATCH_EVENTS: '50' })]);
    expect(await waitFor(async () => (await indexedCount()) === total, 120_000), describeRun(first!)).to.equal(true);
    const pending = await sql<{ n: number }>('select count(*)::integer as n from conversations where search_from is not null and owner_id = ?', [user.userId]);
    expect(pending[0]!.n).to.equal(0);
    const perEvent = await sql<{ n: number; events: number }>(
      `select count(*)::integer as n, count(distinct (e.conversation_id, e.seq))::integer as events
       from conversation_events e join event_search s using (conversation_id, seq) where s.owner_id = ?`,
      [user.userId],
    );
    expect(perEvent[0]).to.deep.equal({ n: total, events: total });
    for (const server of [first!, second!]) expect(server.stdout + server.stderr).to.not.include('search indexing failed');

    const response = await fetch(`${second!.baseUrl}/api/v1/search/events/count?q=crashword`, { headers: { 'X-Access-Token': user.accessToken } });
    expect(await response.json()).to.include({ count: total });
    const last = await fetch(`${first!.baseUrl}/api/v1/search/events?q=${encodeURIComponent('"batch 31 event 49"')}`, { headers: { 'X-Access-Token': user.accessToken } });
    expect(((await last.json()) as { items: unknown[] }).items).to.have.length(1);
  });
});
