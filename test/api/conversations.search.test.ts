import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { expect } from 'chai';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { isoInstant } from '../../src/conversations/event-time.ts';
import { conversationExport, writeChunks } from '../../src/conversations/export.ts';
import { postEvents } from '../helpers/webhook.ts';

interface StoredEvent {
  seq: number;
  received_at: string;
  event: Record<string, unknown> & { id: string; kind: string };
}
interface EventPage {
  items: StoredEvent[];
  next_after_seq: number | null;
  next_before_seq: number | null;
  next_cursor: string | null;
}
interface ConversationView {
  id: string;
  title: string | null;
  execution_status: string | null;
  created_at: string;
  updated_at: string;
  parent_conversation_id: string | null;
  sub_conversation_ids: string[];
  forked_from_conversation_id: string | null;
  tags: Record<string, string>;
}

/** The kinds used below, each with a source of its own. */
const KINDS = ['MessageEvent', 'ActionEvent', 'ObservationEvent', 'PauseEvent'] as const;

describe('search and export', () => {
  let client: TestApp;
  let owner: UserFixture;
  let stranger: UserFixture;
  before(async () => {
    client = await createTestApp();
  });
  beforeEach(async () => {
    owner = await createUserFixture();
    stranger = await createUserFixture();
  });

  const deliver = (conversationId: string, events: unknown[], user = owner) => postEvents(client, user.sessionApiKey, conversationId, events).expect(200);
  const postInfo = (info: Record<string, unknown>, user = owner) =>
    client.request.post('/api/v1/webhooks/conversations').set('X-Session-API-Key', user.sessionApiKey).send(info);
  const get = (path: string, user = owner) => client.request.get(path).set('X-Access-Token', user.accessToken);

  /** `n` events cycling through KINDS; event i has timestamp 2026-01-01T00:00:i (seconds) UTC. */
  const eventsNumbered = (from: number, n: number) =>
    Array.from({ length: n }, (_, k) => {
      const i = from + k;
      const kind = KINDS[i % KINDS.length]!;
      const extra: Record<string, unknown> = { timestamp: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString().replace('Z', '') };
      if (kind === 'MessageEvent') extra.source = i % 8 === 0 ? 'user' : 'agent';
      if (kind === 'MessageEvent' && extra.source === 'agent') extra.llm_response_id = 'resp';
      return minimalEvent(kind, extra);
    });

  /** Every page of a query, following next_cursor. */
  async function walk(path: string, query: string, limit: number): Promise<StoredEvent[]> {
    const seen: StoredEvent[] = [];
    let cursor: string | null = null;
    for (let pages = 0; pages < 1000; pages++) {
      const url: string = `${path}?${query}&limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`;
      const page = (await get(url).expect(200)).body as EventPage;
      seen.push(...page.items);
      cursor = page.next_cursor;
      if (!cursor) return seen;
    }
    throw new Error('too many pages');
  }

  describe('GET /api/v1/conversations/{conversation_id}/events', () => {
    let conversationId: string;
    let all: StoredEvent[];
    beforeEach(async () => {
      conversationId = randomUUID();
      await deliver(conversationId, eventsNumbered(0, 40));
      all = (await get(`/api/v1/conversations/${conversationId}/events?limit=1000`).expect(200)).body.items;
      expect(all).to.have.length(40);
    });
    const path = () => `/api/v1/conversations/${conversationId}/events`;

    it('lists newest first with order=desc, with next_before_seq and no next_after_seq', async () => {
      const page = (await get(`${path()}?order=desc&limit=5`).expect(200)).body as EventPage;
      expect(page.items.map((e) => e.seq)).to.deep.equal([40, 39, 38, 37, 36]);
      expect(page.next_before_seq).to.equal(36);
      expect(page.next_after_seq).to.equal(null);
      const next = (await get(`${path()}?order=desc&limit=5&before_seq=36`).expect(200)).body as EventPage;
      expect(next.items.map((e) => e.seq)).to.deep.equal([35, 34, 33, 32, 31]);
    });

    for (const order of ['asc', 'desc'] as const) {
      it(`pages through every event in ${order} order by cursor, none skipped or repeated, while new events arrive`, async () => {
        const seen: number[] = [];
        let cursor: string | null = null;
        let delivered = 40;
        do {
          const url: string = `${path()}?order=${order}&limit=3${cursor ? `&cursor=${cursor}` : ''}`;
          const page = (await get(url).expect(200)).body as EventPage;
          seen.push(...page.items.map((e) => e.seq));
          cursor = page.next_cursor;
          if (delivered < 52) {
            await deliver(conversationId, eventsNumbered(delivered, 2));
            delivered += 2;
          }
        } while (cursor);
        const expected = order === 'asc' ? Array.from({ length: 52 }, (_, i) => i + 1) : Array.from({ length: 40 }, (_, i) => 40 - i);
        expect(seen).to.deep.equal(expected);
      });
    }

    it('keeps next_after_seq working as after_seq in asc order (the old paging)', async () => {
      const first = (await get(`${path()}?limit=10`).expect(200)).body as EventPage;
      expect(first.next_after_seq).to.equal(10);
      const second = (await get(`${path()}?limit=10&after_seq=10`).expect(200)).body as EventPage;
      expect(second.items[0]!.seq).to.equal(11);
    });

    it('filters by one kind and by several (any of), in both orders, across pages', async () => {
      for (const order of ['asc', 'desc']) {
        const messages = await walk(path(), `order=${order}&kind=MessageEvent`, 3);
        const expected = all.filter((e) => e.event.kind === 'MessageEvent').map((e) => e.seq);
        expect(messages.map((e) => e.seq)).to.deep.equal(order === 'asc' ? expected : [...expected].reverse());
        const two = await walk(path(), `order=${order}&kind=PauseEvent&kind=ActionEvent`, 4);
        const expectedTwo = all.filter((e) => e.event.kind === 'PauseEvent' || e.event.kind === 'ActionEvent').map((e) => e.seq);
        expect(two.map((e) => e.seq)).to.deep.equal(order === 'asc' ? expectedTwo : [...expectedTwo].reverse());
      }
    });

    it('filters by source (repeatable)', async () => {
      const users = await walk(path(), 'source=user', 2);
      expect(users.map((e) => e.seq)).to.deep.equal(all.filter((e) => e.event.source === 'user').map((e) => e.seq));
      const both = await walk(path(), 'source=user&source=environment', 5);
      expect(both.map((e) => e.seq)).to.deep.equal(
        all.filter((e) => e.event.source === 'user' || e.event.source === 'environment').map((e) => e.seq),
      );
    });

    it('filters by since/until on the event timestamp (inclusive; naive = UTC; offsets applied)', async () => {
      // Events 10..19 carry 00:00:10 … 00:00:19 UTC; seq = i + 1.
      const page = (await get(`${path()}?since=2026-01-01T00:00:10Z&until=2026-01-01T01:00:19%2B01:00&limit=100`).expect(200)).body as EventPage;
      expect(page.items.map((e) => e.seq)).to.deep.equal([11, 12, 13, 14, 15, 16, 17, 18, 19, 20]);
      const naive = (await get(`${path()}?since=2026-01-01T00:00:38&limit=100`).expect(200)).body as EventPage;
      expect(naive.items.map((e) => e.seq)).to.deep.equal([39, 40]);
      const date = (await get(`${path()}?until=2025-12-31&limit=100`).expect(200)).body as EventPage;
      expect(date.items).to.deep.equal([]);
    });

    it('uses the received time for an event whose timestamp is not ISO 8601', async () => {
      const id = randomUUID();
      const before = new Date(Date.now() - 1000).toISOString();
      await deliver(id, [minimalEvent('PauseEvent', { timestamp: 'yesterday' }), minimalEvent('PauseEvent', { timestamp: '2026-02-30T00:00:00' })]);
      const page = (await get(`/api/v1/conversations/${id}/events?since=${before}`).expect(200)).body as EventPage;
      expect(page.items).to.have.length(2);
      const old = (await get(`/api/v1/conversations/${id}/events?until=2026-03-01`).expect(200)).body as EventPage;
      expect(old.items).to.have.length(0);
    });

    it('combines filters with after_seq/before_seq and pages them, in both orders', async () => {
      for (const order of ['asc', 'desc']) {
        const got = await walk(path(), `order=${order}&kind=ActionEvent&kind=ObservationEvent&after_seq=5&before_seq=35&since=2026-01-01T00:00:08Z`, 2);
        const expected = all
          .filter((e) => ['ActionEvent', 'ObservationEvent'].includes(e.event.kind) && e.seq > 5 && e.seq < 35 && e.seq - 1 >= 8)
          .map((e) => e.seq);
        expect(got.map((e) => e.seq)).to.deep.equal(order === 'asc' ? expected : [...expected].reverse());
      }
    });

    it('returns 422 on cursor for a cursor of another query or of the other order', async () => {
      const page = (await get(`${path()}?kind=MessageEvent&limit=2`).expect(200)).body as EventPage;
      for (const query of ['kind=ActionEvent', 'kind=MessageEvent&order=desc', '', 'kind=MessageEvent&since=2026-01-01']) {
        const response = await get(`${path()}?${query}&cursor=${page.next_cursor}`).expect(422);
        expect(response.body.detail[0].loc, query).to.deep.equal(['query', 'cursor']);
      }
      // The same query with another limit is fine.
      await get(`${path()}?kind=MessageEvent&limit=5&cursor=${page.next_cursor}`).expect(200);
    });

    const bad: [string, (string | number)[]][] = [
      ['order=newest', ['query', 'order']],
      ['since=yesterday', ['query', 'since']],
      ['until=2026-02-30', ['query', 'until']],
      ['since=2026-01-02&until=2026-01-01', ['query', 'until']],
      ['limit=0', ['query', 'limit']],
      ['limit=1001', ['query', 'limit']],
      ['after_seq=10&before_seq=10', ['query', 'before_seq']],
      ['after_seq=10&before_seq=3', ['query', 'before_seq']],
      ['before_seq=0', ['query', 'before_seq']],
      ['after_seq=99999999999', ['query', 'after_seq']],
      ['kind=NoSuchEvent', ['query', 'kind', 0]],
      ['source=robot', ['query', 'source', 0]],
      ['cursor=not-a-cursor', ['query', 'cursor']],
    ];
    for (const [query, loc] of bad) {
      it(`returns 422 naming ${JSON.stringify(loc)} for ${query}`, async () => {
        const response = await get(`${path()}?${query}`).expect(422);
        expect(response.body.detail.map((d: { loc: unknown[] }) => d.loc)).to.deep.include(loc);
      });
    }
  });

  describe('GET /api/v1/conversations/{conversation_id}/events/count', () => {
    it('equals the number of items the list yields with the same filters', async () => {
      const conversationId = randomUUID();
      await deliver(conversationId, eventsNumbered(0, 30));
      const path = `/api/v1/conversations/${conversationId}/events`;
      const queries = [
        '',
        'kind=MessageEvent',
        'kind=MessageEvent&kind=PauseEvent',
        'source=agent',
        'since=2026-01-01T00:00:12&until=2026-01-01T00:00:20',
        'after_seq=4&before_seq=21',
        'after_seq=4',
        'before_seq=1000',
        'kind=ActionEvent&after_seq=3&since=2026-01-01T00:00:05Z',
        'kind=CondensationRequest',
      ];
      for (const query of queries) {
        const listed = await walk(path, query, 4);
        const { body } = await get(`${path}/count?${query}`).expect(200);
        expect(body, query).to.deep.equal({ count: listed.length });
      }
    });

    it("returns 403 for someone else's conversation and 404 for an unknown one", async () => {
      const conversationId = randomUUID();
      await deliver(conversationId, eventsNumbered(0, 2));
      await get(`/api/v1/conversations/${conversationId}/events/count`, stranger).expect(403);
      await get(`/api/v1/conversations/${randomUUID()}/events/count`).expect(404);
    });
  });

  describe('GET /api/v1/conversations/{conversation_id}/events/{event_id}', () => {
    it('returns the event as the list renders it', async () => {
      const conversationId = randomUUID();
      await deliver(conversationId, eventsNumbered(0, 5));
      const listed = (await get(`/api/v1/conversations/${conversationId}/events`).expect(200)).body as EventPage;
      const third = listed.items[2]!;
      const { body } = await get(`/api/v1/conversations/${conversationId}/events/${encodeURIComponent(third.event.id)}`).expect(200);
      expect(body).to.deep.equal(third);
    });

    it("returns 404 for an id the conversation does not hold, 403 for someone else's conversation", async () => {
      const conversationId = randomUUID();
      const [event] = eventsNumbered(0, 1);
      await deliver(conversationId, [event]);
      await get(`/api/v1/conversations/${conversationId}/events/${randomUUID()}`).expect(404);
      await get(`/api/v1/conversations/${conversationId}/events/${(event as { id: string }).id}`, stranger).expect(403);
      await get(`/api/v1/conversations/${randomUUID()}/events/${(event as { id: string }).id}`).expect(404);
    });
  });

  describe('GET /api/v1/conversations (search)', () => {
    const info = (id: string, extra: Record<string, unknown> = {}) => ({
      id,
      title: 'Untitled',
      execution_status: 'running',
      updated_at: new Date().toISOString(),
      ...extra,
    });
    /** Creates conversations with the given infos, one after the other (distinct created_at). */
    async function createMany(infos: Record<string, unknown>[]): Promise<void> {
      for (const body of infos) {
        await postInfo(body).expect(201);
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
    }
    async function walkConversations(query: string, limit: number): Promise<ConversationView[]> {
      const seen: ConversationView[] = [];
      let cursor: string | null = null;
      do {
        const url: string = `/api/v1/conversations?${query}&limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`;
        const page = (await get(url).expect(200)).body as { items: ConversationView[]; next_cursor: string | null };
        seen.push(...page.items);
        cursor = page.next_cursor;
      } while (cursor);
      return seen;
    }

    it('sorts created_desc (default), created_asc and updated_desc, paging without gap or duplicate', async () => {
      const ids = Array.from({ length: 9 }, () => randomUUID());
      await createMany(ids.map((id) => info(id)));
      // Touch the third one: it becomes the most recently updated.
      await deliver(ids[2]!, eventsNumbered(0, 1));
      expect((await walkConversations('', 2)).map((c) => c.id)).to.deep.equal([...ids].reverse());
      expect((await walkConversations('sort=created_asc', 2)).map((c) => c.id)).to.deep.equal(ids);
      const updated = await walkConversations('sort=updated_desc', 4);
      expect(updated[0]!.id).to.equal(ids[2]);
      expect(new Set(updated.map((c) => c.id)).size).to.equal(9);
      const times = updated.map((c) => c.updated_at);
      expect(times).to.deep.equal([...times].sort().reverse());
    });

    it('filters by q (title contains, case-insensitive, % and _ literal), status, tag, parent and dates; counts match the list', async () => {
      const parent = randomUUID();
      const child1 = randomUUID();
      const child2 = randomUUID();
      const other = randomUUID();
      const forked = randomUUID();
      await createMany([
        info(parent, { title: 'Fix the BILLING export', tags: { project: 'billing', team: 'a' } }),
        info(child1, { title: 'billing: sub-task 100%', parent_conversation_id: parent, execution_status: 'finished', tags: { project: 'billing' } }),
        info(child2, { title: 'Sub task two', parent_conversation_id: parent, execution_status: 'error' }),
        info(other, { title: 'Unrelated work_item', execution_status: 'paused', tags: { project: 'search' } }),
        info(forked, { title: 'Forked', forked_from_conversation_id: other }),
      ]);
      const middle = (await get(`/api/v1/conversations/${child2}`).expect(200)).body as ConversationView;
      const cases: [string, string[]][] = [
        ['q=billing', [child1, parent]],
        ['q=100%25', [child1]],
        ['q=k_i', [other]],
        ['q=%25', [child1]],
        ['status=finished&status=error', [child2, child1]],
        ['tag=project:billing', [child1, parent]],
        ['tag=project:billing&tag=team:a', [parent]],
        ['tag=project:billing&tag=project:search', []],
        [`parent_conversation_id=${parent}`, [child2, child1]],
        [`created_since=${encodeURIComponent(middle.created_at)}`, [forked, other, child2]],
        [`created_until=${encodeURIComponent(middle.created_at)}`, [child2, child1, parent]],
        [`updated_since=${encodeURIComponent(middle.updated_at)}&q=sub`, [child2]],
        ['q=billing&status=finished', [child1]],
      ];
      for (const [query, expected] of cases) {
        const listed = await walkConversations(query, 1);
        expect(listed.map((c) => c.id), query).to.deep.equal(expected);
        const { body } = await get(`/api/v1/conversations/count?${query}`).expect(200);
        expect(body, query).to.deep.equal({ count: expected.length });
      }
      const shown = (await get(`/api/v1/conversations/${parent}`).expect(200)).body as ConversationView;
      expect(shown.sub_conversation_ids).to.deep.equal([child1, child2]);
      expect(shown.tags).to.deep.equal({ project: 'billing', team: 'a' });
      const child = (await get(`/api/v1/conversations/${child1}`).expect(200)).body as ConversationView;
      expect(child.parent_conversation_id).to.equal(parent);
      expect((await get(`/api/v1/conversations/${forked}`).expect(200)).body.forked_from_conversation_id).to.equal(other);
    });

    it("never lists or counts someone else's conversations", async () => {
      const mine = randomUUID();
      await createMany([info(mine, { title: 'shared words' })]);
      await postInfo(info(randomUUID(), { title: 'shared words' }), stranger).expect(201);
      expect((await walkConversations('q=shared', 5)).map((c) => c.id)).to.deep.equal([mine]);
      expect((await get('/api/v1/conversations/count?q=shared').expect(200)).body).to.deep.equal({ count: 1 });
    });

    it('returns 422 on cursor for a cursor of another query or sort', async () => {
      await createMany([info(randomUUID()), info(randomUUID()), info(randomUUID())]);
      const page = (await get('/api/v1/conversations?limit=1&q=untitled').expect(200)).body;
      for (const query of ['q=other', 'q=untitled&sort=created_asc', '', 'q=untitled&status=paused']) {
        const response = await get(`/api/v1/conversations?${query}&cursor=${page.next_cursor}`).expect(422);
        expect(response.body.detail[0].loc, query).to.deep.equal(['query', 'cursor']);
      }
      await get(`/api/v1/conversations?q=untitled&limit=2&cursor=${page.next_cursor}`).expect(200);
    });

    const bad: [string, unknown[]][] = [
      ['sort=title', ['query', 'sort']],
      ['status=sleeping', ['query', 'status', 0]],
      ['created_since=last-week', ['query', 'created_since']],
      ['updated_until=2026-13-01', ['query', 'updated_until']],
      ['created_since=2026-02-01&created_until=2026-01-01', ['query', 'created_until']],
      ['updated_since=2026-02-01&updated_until=2026-01-01', ['query', 'updated_until']],
      ['tag=nocolon', ['query', 'tag', 0]],
      ['parent_conversation_id=nope', ['query', 'parent_conversation_id']],
      ['limit=101', ['query', 'limit']],
      ['cursor=eyJ4IjoxfQ', ['query', 'cursor']],
    ];
    for (const [query, loc] of bad) {
      it(`returns 422 naming ${JSON.stringify(loc)} for ${query}`, async () => {
        const response = await get(`/api/v1/conversations?${query}`).expect(422);
        expect(response.body.detail.map((d: { loc: unknown[] }) => d.loc)).to.deep.include(loc);
      });
    }
  });

  describe('PATCH /api/v1/conversations/{conversation_id}', () => {
    const rename = (id: string, title: unknown, user = owner) =>
      client.request.patch(`/api/v1/conversations/${id}`).set('X-Access-Token', user.accessToken).send({ title });
    const info = (id: string, title: string | null, minute: number) => ({
      id,
      title,
      updated_at: `2026-01-01T00:${String(minute).padStart(2, '0')}:00Z`,
    });

    it('renames for the owner; the new title is shown, searched and counted', async () => {
      const id = randomUUID();
      await deliver(id, eventsNumbered(0, 1));
      const { body } = await rename(id, 'My renamed conversation').expect(200);
      expect(body.title).to.equal('My renamed conversation');
      expect((await get(`/api/v1/conversations/${id}`).expect(200)).body.title).to.equal('My renamed conversation');
      expect((await get('/api/v1/conversations/count?q=RENAMED').expect(200)).body).to.deep.equal({ count: 1 });
    });

    it('keeps the rename against later infos repeating the old title, a null title or the first title; yields to a changed one', async () => {
      const id = randomUUID();
      await postInfo(info(id, 'Agent title', 1)).expect(201);
      await rename(id, 'Mine').expect(200);
      await postInfo(info(id, 'Agent title', 2)).expect(200);
      expect((await get(`/api/v1/conversations/${id}`).expect(200)).body.title).to.equal('Mine');
      await postInfo(info(id, null, 3)).expect(200);
      expect((await get(`/api/v1/conversations/${id}`).expect(200)).body.title).to.equal('Mine');
      // A late retry (older updated_at) is ignored altogether.
      await postInfo(info(id, 'Stale', 0)).expect(200);
      expect((await get(`/api/v1/conversations/${id}`).expect(200)).body.title).to.equal('Mine');
      // The agent's title was null in the last info: its first title again does not count as a change.
      await postInfo(info(id, 'Agent title', 4)).expect(200);
      expect((await get(`/api/v1/conversations/${id}`).expect(200)).body.title).to.equal('Mine');
      // Renamed on the agent-server's side: its new title wins, and is what q finds.
      await postInfo(info(id, 'Renamed upstream', 5)).expect(200);
      expect((await get(`/api/v1/conversations/${id}`).expect(200)).body.title).to.equal('Renamed upstream');
      expect((await get('/api/v1/conversations/count?q=mine').expect(200)).body).to.deep.equal({ count: 0 });
      expect((await get('/api/v1/conversations/count?q=upstream').expect(200)).body).to.deep.equal({ count: 1 });
      // And the next rename wins again.
      await rename(id, 'Mine again').expect(200);
      await postInfo(info(id, 'Renamed upstream', 6)).expect(200);
      expect((await get(`/api/v1/conversations/${id}`).expect(200)).body.title).to.equal('Mine again');
    });

    it('keeps a rename made before any info against the first info', async () => {
      const id = randomUUID();
      await deliver(id, eventsNumbered(0, 1));
      await rename(id, 'Before any info').expect(200);
      await postInfo(info(id, 'Agent title', 1)).expect(200);
      expect((await get(`/api/v1/conversations/${id}`).expect(200)).body.title).to.equal('Before any info');
    });

    it("returns 403 for someone else's conversation, 404 for an unknown one, and 422 for a bad title", async () => {
      const id = randomUUID();
      await deliver(id, eventsNumbered(0, 1));
      await rename(id, 'Nope', stranger).expect(403);
      await rename(randomUUID(), 'Nope').expect(404);
      for (const title of ['', '   ', 'x'.repeat(501), 42, null, 'nul\u0000']) {
        const response = await rename(id, title).expect(422);
        expect(response.body.detail[0].loc[0]).to.equal('body');
      }
      await rename(id, 'x'.repeat(500)).expect(200);
    });
  });

  describe('GET /api/v1/conversations/{conversation_id}/export', () => {
    it('streams the conversation then every event, as stored: NUL and lone surrogates read back identical', async () => {
      const id = randomUUID();
      const tricky = minimalEvent('MessageEvent', {
        source: 'user',
        llm_message: { role: 'user', content: [{ type: 'text', text: 'nul \u0000 lone \ud800 pair \ud83d\ude00', cache_prompt: false }] },
      });
      await deliver(id, [...eventsNumbered(0, 3), tricky]);
      const stored = (await get(`/api/v1/conversations/${id}/events`).expect(200)) as { text: string };
      await postInfo({ id, title: 'Export me', updated_at: '2026-01-01T00:00:00Z', agent: { llm: { api_key: 'sk-secret' } } }).expect(200);

      const response = await get(`/api/v1/conversations/${id}/export`)
        .buffer(true)
        .parse((res, done) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => done(null, Buffer.concat(chunks).toString('utf8')));
        })
        .expect(200);
      expect(response.headers['content-type']).to.match(/^application\/x-ndjson/);
      expect(response.headers['content-disposition']).to.equal(`attachment; filename="conversation-${id}.ndjson"`);
      const lines = (response.body as string).split('\n');
      expect(lines.pop()).to.equal('');
      const header = JSON.parse(lines[0]!);
      expect(header.conversation).to.include({ id, title: 'Export me', event_count: lines.length - 1 });
      expect(header.info.agent.llm).to.not.have.property('api_key');
      // Each event line is byte for byte the list's item (the list is JSON text spliced from storage).
      const listedText = stored.text;
      for (const line of lines.slice(1)) expect(listedText).to.include(line);
      const last = lines[lines.length - 1]!;
      expect(last).to.include('nul \\u0000 lone \\ud800 pair');
      const parsed = JSON.parse(last);
      expect(parsed.event.llm_message.content[0].text).to.equal('nul \u0000 lone \ud800 pair \ud83d\ude00');
    });

    it('streams a conversation of several pages to a slow reader: every line as listed, in order (the export reuses its page buffers)', async () => {
      const id = randomUUID();
      for (let from = 0; from < 2_100; from += 300) await deliver(id, eventsNumbered(from, 300));
      const listed: string[] = [];
      for (let after = 0; after < 2_100; after += 1000) {
        const page = (await get(`/api/v1/conversations/${id}/events?after_seq=${after}&limit=1000`).expect(200)) as { text: string };
        // The items of the page as their own JSON text, one per line of the export.
        listed.push(...(JSON.parse(page.text) as EventPage).items.map((item) => JSON.stringify(item)));
      }
      const response = await get(`/api/v1/conversations/${id}/export`)
        .buffer(true)
        .parse((res, done) => {
          const chunks: Buffer[] = [];
          // A reader slower than the database: the export waits for the socket before reusing a page buffer.
          const stream = res as unknown as NodeJS.ReadableStream;
          stream.on('data', (chunk: Buffer) => {
            chunks.push(chunk);
            stream.pause();
            setTimeout(() => stream.resume(), 2);
          });
          stream.on('end', () => done(null, Buffer.concat(chunks).toString('utf8')));
        })
        .expect(200);
      const lines = (response.body as string).split('\n').slice(1, -1);
      expect(lines).to.have.length(2_100);
      expect(lines.map((line) => JSON.stringify(JSON.parse(line)))).to.deep.equal(listed);
    });

    it('reads events in bounded pages (conversationExport with a tiny page) and yields all of them in order', async () => {
      const id = randomUUID();
      await deliver(id, eventsNumbered(0, 25));
      const chunks: string[] = [];
      for await (const chunk of conversationExport(testDatabase().orm.em.fork(), id, { pageBytes: 1 })) chunks.push(chunk.toString('utf8'));
      // One line per chunk after the header: a page of one event each.
      expect(chunks).to.have.length(26);
      const seqs = chunks.slice(1).map((chunk) => JSON.parse(chunk).seq);
      expect(seqs).to.deep.equal(Array.from({ length: 25 }, (_, i) => i + 1));
    });

    it('writeChunks hands each reused page to a slow sink before the next is read into it', async () => {
      const id = randomUUID();
      await deliver(id, eventsNumbered(0, 25));
      const em = testDatabase().orm.em.fork();
      const expected: string[] = [];
      for await (const chunk of conversationExport(em, id, { pageBytes: 1 })) expected.push(chunk.toString('utf8'));
      // A sink that reads each chunk only 5 ms after it was written, as a socket with a full buffer does.
      const received: string[] = [];
      const slow = new Writable({
        highWaterMark: 1,
        write(chunk: Buffer, _encoding, callback) {
          setTimeout(() => {
            received.push(chunk.toString('utf8'));
            callback();
          }, 5);
        },
      });
      await writeChunks(conversationExport(em, id, { pageBytes: 1 }), slow);
      expect(received).to.deep.equal(expected);
    });

    it("returns 403 for someone else's conversation and 404 for an unknown one", async () => {
      const id = randomUUID();
      await deliver(id, eventsNumbered(0, 1));
      await get(`/api/v1/conversations/${id}/export`, stranger).expect(403);
      await get(`/api/v1/conversations/${randomUUID()}/export`).expect(404);
    });
  });

  describe('event time (isoInstant)', () => {
    const cases: [string, string | null][] = [
      ['2025-01-15T10:30:03.123456', '2025-01-15T10:30:03.123456Z'],
      ['2025-01-15T10:30:03.1234567+02:00', '2025-01-15T08:30:03.123456Z'],
      ['2025-01-15', '2025-01-15T00:00:00.000000Z'],
      ['2024-02-29T00:00', '2024-02-29T00:00:00.000000Z'],
      ['2023-02-29', null],
      ['2025-04-31T00:00:00', null],
      ['0001-01-01T00:30+01:00', null],
      ['2025-01-15T24:00:00', null],
      ['yesterday', null],
    ];
    for (const [input, expected] of cases) {
      it(`reads ${input} as ${expected}`, () => {
        expect(isoInstant(input)).to.equal(expected);
      });
    }
  });
});
