import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { postEvents } from '../helpers/webhook.ts';

interface ConversationView {
  id: string;
  execution_status: string | null;
  event_count: number;
  created_at: string;
  updated_at: string;
  last_event_at: string | null;
}

interface ConversationPage {
  items: ConversationView[];
  next_cursor: string | null;
}

interface EventPage {
  items: { seq: number; received_at: string; event: Record<string, unknown> }[];
  next_after_seq: number | null;
}

/** An ISO 8601 date-time as `Date.prototype.toISOString` writes it (UTC, milliseconds). */
const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const DASHED_LOWER_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Which credential header a request carries. */
type Credential = { header: 'X-Access-Token' | 'X-Session-API-Key'; value: string };
const accessTokenOf = (user: UserFixture): Credential => ({ header: 'X-Access-Token', value: user.accessToken });
const sessionKeyOf = (user: UserFixture): Credential => ({ header: 'X-Session-API-Key', value: user.sessionApiKey });

describe('conversations (read-back API)', () => {
  let client: TestApp;
  let owner: UserFixture;
  before(async () => {
    client = await createTestApp();
  });
  beforeEach(async () => {
    owner = await createUserFixture();
  });

  /** Delivers `events` to the webhook as `user` (the owner by default). */
  const deliver = (conversationId: string, events: unknown[], user = owner) => postEvents(client, user.sessionApiKey, conversationId, events).expect(200);

  /** A GET as the owner (access token) unless another credential, or `null` for none, is given. */
  const get = (path: string, credential: Credential | null = accessTokenOf(owner)) => {
    const request = client.request.get(path);
    return credential ? request.set(credential.header, credential.value) : request;
  };

  /** Creates a conversation of `user` with one PauseEvent, returning its (dashed) id. */
  const createConversation = async (user = owner): Promise<string> => {
    const conversationId = randomUUID();
    await deliver(conversationId, [minimalEvent('PauseEvent')], user);
    return conversationId;
  };

  describe('GET /api/v1/conversations/{conversation_id}', () => {
    it('returns id, execution_status, event_count and ISO 8601 timestamps', async () => {
      const conversationId = randomUUID();
      const before = Date.now();
      await deliver(conversationId, [minimalEvent('MessageEvent'), minimalEvent('PauseEvent'), minimalEvent('ActionEvent')]);
      const after = Date.now();

      const response = await get(`/api/v1/conversations/${conversationId}`).expect(200);
      const conversation = response.body as ConversationView;
      expect(conversation).to.have.all.keys('id', 'title', 'execution_status', 'event_count', 'created_at', 'updated_at', 'last_event_at', 'metrics',
        'parent_conversation_id', 'sub_conversation_ids', 'forked_from_conversation_id', 'tags', 'accumulated_cost_usd', 'accumulated_cost_micro_usd', 'unrecognized_event_count', 'delivery_refusals');
      expect(conversation.id).to.equal(conversationId);
      // Until the agent-server posts its conversation info (test/api/webhooks.conversation-info.test.ts).
      expect(conversation).to.include({ title: null, metrics: null, accumulated_cost_usd: 0, accumulated_cost_micro_usd: 0, delivery_refusals: null });
      expect(conversation.execution_status).to.equal('paused');
      expect(conversation.event_count).to.equal(3);
      for (const field of ['created_at', 'updated_at', 'last_event_at'] as const) {
        expect(conversation[field], field).to.match(ISO_8601);
        // The database clock and ours may differ by a little; a second of slack is plenty.
        const time = Date.parse(conversation[field]!);
        expect(time, field).to.be.within(before - 1000, after + 1000);
      }
      expect(Date.parse(conversation.updated_at)).to.be.at.least(Date.parse(conversation.created_at));
    });

    it('returns the dashed lower-case id when the conversation was delivered with the 32-hex form', async () => {
      const conversationId = randomUUID();
      await deliver(conversationId.replace(/-/g, '').toUpperCase(), [minimalEvent('PauseEvent')]);
      for (const form of [conversationId, conversationId.replace(/-/g, ''), conversationId.toUpperCase()]) {
        const response = await get(`/api/v1/conversations/${form}`).expect(200);
        expect(response.body.id, form).to.equal(conversationId);
        expect(response.body.id).to.match(DASHED_LOWER_UUID);
      }
    });

    it('moves updated_at and last_event_at forward with a later delivery', async () => {
      const conversationId = await createConversation();
      const first = (await get(`/api/v1/conversations/${conversationId}`).expect(200)).body as ConversationView;
      await new Promise((resolve) => setTimeout(resolve, 20));
      await deliver(conversationId, [minimalEvent('InterruptEvent')]);
      const second = (await get(`/api/v1/conversations/${conversationId}`).expect(200)).body as ConversationView;
      expect(second.created_at).to.equal(first.created_at);
      expect(second.event_count).to.equal(2);
      expect(Date.parse(second.updated_at)).to.be.greaterThan(Date.parse(first.updated_at));
      expect(Date.parse(second.last_event_at!)).to.be.greaterThan(Date.parse(first.last_event_at!));
    });

    it('is readable by the owner with X-Access-Token and with X-Session-API-Key', async () => {
      const conversationId = await createConversation();
      const byToken = await get(`/api/v1/conversations/${conversationId}`, accessTokenOf(owner)).expect(200);
      const byKey = await get(`/api/v1/conversations/${conversationId}`, sessionKeyOf(owner)).expect(200);
      expect(byKey.body).to.deep.equal(byToken.body);
    });

    it("returns 403 {detail} for another user's conversation, with either credential", async () => {
      const conversationId = await createConversation();
      const stranger = await createUserFixture();
      for (const credential of [accessTokenOf(stranger), sessionKeyOf(stranger)]) {
        const response = await get(`/api/v1/conversations/${conversationId}`, credential).expect(403);
        expect(response.body, credential.header).to.have.all.keys('detail');
        expect(response.body.detail).to.be.a('string').and.not.be.empty;
      }
    });

    it('returns 404 {detail} for an unknown conversation id', async () => {
      const response = await get(`/api/v1/conversations/${randomUUID()}`).expect(404);
      expect(response.body).to.have.all.keys('detail');
      expect(response.body.detail).to.be.a('string').and.not.be.empty;
    });

    it('returns 401 {detail} without a credential, and for an unknown one', async () => {
      const conversationId = await createConversation();
      const missing = await get(`/api/v1/conversations/${conversationId}`, null).expect(401);
      expect(missing.body).to.have.all.keys('detail');
      await get(`/api/v1/conversations/${conversationId}`, { header: 'X-Access-Token', value: 'apat_unknown' }).expect(401);
      await get(`/api/v1/conversations/${conversationId}`, { header: 'X-Session-API-Key', value: 'apsk_unknown' }).expect(401);
    });

    it("returns 422 with loc ['path','conversation_id'] for an id that is not a UUID", async () => {
      const response = await get('/api/v1/conversations/not-a-uuid').expect(422);
      expect(response.body.detail.map((error: { loc: unknown[] }) => error.loc)).to.deep.include(['path', 'conversation_id']);
    });
  });

  describe('GET /api/v1/conversations/{conversation_id}/events', () => {
    const eventsPath = (conversationId: string, query = '') => `/api/v1/conversations/${conversationId}/events${query}`;

    it('walks 25 events page by page with after_seq and limit: in seq order, none skipped or repeated', async () => {
      const conversationId = randomUUID();
      const kinds = ['MessageEvent', 'ActionEvent', 'ObservationEvent', 'PauseEvent', 'AgentErrorEvent'];
      const events = Array.from({ length: 25 }, (_, index) => minimalEvent(kinds[index % kinds.length]!));
      // Three deliveries, so the sequence spans batches.
      await deliver(conversationId, events.slice(0, 10));
      await deliver(conversationId, events.slice(10, 17));
      await deliver(conversationId, events.slice(17));

      const seen: EventPage['items'] = [];
      const pageSizes: number[] = [];
      let afterSeq: number | null = 0;
      while (afterSeq !== null) {
        const page = (await get(eventsPath(conversationId, `?after_seq=${afterSeq}&limit=7`)).expect(200)).body as EventPage;
        pageSizes.push(page.items.length);
        seen.push(...page.items);
        if (page.next_after_seq !== null) expect(page.next_after_seq).to.equal(page.items[page.items.length - 1]!.seq);
        afterSeq = page.next_after_seq;
        expect(pageSizes.length, 'too many pages').to.be.at.most(10);
      }
      expect(pageSizes).to.deep.equal([7, 7, 7, 4]);
      expect(seen.map((item) => item.seq)).to.deep.equal(Array.from({ length: 25 }, (_, index) => index + 1));
      expect(seen.map((item) => item.event.id)).to.deep.equal(events.map((event) => event.id));
      for (const item of seen) expect(item.received_at).to.match(ISO_8601);
    });

    it('returns next_after_seq null when the last page is exactly full', async () => {
      const conversationId = randomUUID();
      await deliver(conversationId, Array.from({ length: 4 }, () => minimalEvent('PauseEvent')));
      const first = (await get(eventsPath(conversationId, '?limit=2')).expect(200)).body as EventPage;
      expect(first.next_after_seq).to.equal(2);
      const last = (await get(eventsPath(conversationId, '?after_seq=2&limit=2')).expect(200)).body as EventPage;
      expect(last.items.map((item) => item.seq)).to.deep.equal([3, 4]);
      expect(last.next_after_seq).to.equal(null);
    });

    it('returns an empty page after the last event', async () => {
      const conversationId = await createConversation();
      const page = (await get(eventsPath(conversationId, '?after_seq=1')).expect(200)).body as EventPage;
      expect(page).to.deep.equal({ items: [], next_after_seq: null, next_before_seq: null, next_cursor: null });
    });

    it('filters by kind, paging through the matching events only', async () => {
      const conversationId = randomUUID();
      const events = Array.from({ length: 12 }, (_, index) => minimalEvent(index % 3 === 0 ? 'MessageEvent' : 'PauseEvent'));
      await deliver(conversationId, events);
      const messages = events.filter((event) => event.kind === 'MessageEvent');

      const first = (await get(eventsPath(conversationId, '?kind=MessageEvent&limit=3')).expect(200)).body as EventPage;
      expect(first.items.map((item) => item.seq)).to.deep.equal([1, 4, 7]);
      expect(first.next_after_seq).to.equal(7);
      const rest = (await get(eventsPath(conversationId, '?kind=MessageEvent&limit=3&after_seq=7')).expect(200)).body as EventPage;
      expect(rest.items.map((item) => item.seq)).to.deep.equal([10]);
      expect(rest.next_after_seq).to.equal(null);
      expect([...first.items, ...rest.items].map((item) => item.event.id)).to.deep.equal(messages.map((event) => event.id));

      const none = (await get(eventsPath(conversationId, '?kind=TokenEvent')).expect(200)).body as EventPage;
      expect(none).to.deep.equal({ items: [], next_after_seq: null, next_before_seq: null, next_cursor: null });
    });

    it("returns 422 with loc ['query','kind'] for an unknown kind", async () => {
      const conversationId = await createConversation();
      const response = await get(eventsPath(conversationId, '?kind=NoSuchEvent')).expect(422);
      expect(response.body.detail.map((error: { loc: unknown[] }) => error.loc)).to.deep.include(['query', 'kind', 0]);
    });

    for (const limit of ['0', '1001', '-1', 'abc']) {
      it(`returns 422 with loc ['query','limit'] for limit=${limit}`, async () => {
        const conversationId = await createConversation();
        const response = await get(eventsPath(conversationId, `?limit=${limit}`)).expect(422);
        expect(response.body.detail).to.be.an('array').that.is.not.empty;
        expect(response.body.detail.map((error: { loc: unknown[] }) => error.loc)).to.deep.include(['query', 'limit']);
      });
    }

    it('accepts the limit bounds 1 and 1000', async () => {
      const conversationId = randomUUID();
      await deliver(conversationId, [minimalEvent('PauseEvent'), minimalEvent('InterruptEvent')]);
      const one = (await get(eventsPath(conversationId, '?limit=1')).expect(200)).body as EventPage;
      expect(one.items).to.have.length(1);
      expect(one.next_after_seq).to.equal(1);
      const thousand = (await get(eventsPath(conversationId, '?limit=1000')).expect(200)).body as EventPage;
      expect(thousand.items).to.have.length(2);
    });

    it("returns 422 with loc ['query','after_seq'] for a negative after_seq", async () => {
      const conversationId = await createConversation();
      const response = await get(eventsPath(conversationId, '?after_seq=-1')).expect(422);
      expect(response.body.detail.map((error: { loc: unknown[] }) => error.loc)).to.deep.include(['query', 'after_seq']);
    });

    it('is readable by the owner with X-Access-Token and with X-Session-API-Key', async () => {
      const conversationId = await createConversation();
      const byToken = await get(eventsPath(conversationId), accessTokenOf(owner)).expect(200);
      const byKey = await get(eventsPath(conversationId), sessionKeyOf(owner)).expect(200);
      expect(byKey.body).to.deep.equal(byToken.body);
      expect(byKey.body.items).to.have.length(1);
    });

    it("returns 403 {detail} for another user's conversation", async () => {
      const conversationId = await createConversation();
      const stranger = await createUserFixture();
      for (const credential of [accessTokenOf(stranger), sessionKeyOf(stranger)]) {
        const response = await get(eventsPath(conversationId), credential).expect(403);
        expect(response.body, credential.header).to.have.all.keys('detail');
      }
    });

    it('returns 404 {detail} for an unknown conversation id', async () => {
      const response = await get(eventsPath(randomUUID())).expect(404);
      expect(response.body).to.have.all.keys('detail');
    });

    it('returns 401 without a credential', async () => {
      const conversationId = await createConversation();
      const response = await get(eventsPath(conversationId), null).expect(401);
      expect(response.body).to.have.all.keys('detail');
    });
  });

  describe('GET /api/v1/conversations', () => {
    /** Creates `count` conversations of `user` one after another, returning their ids oldest first. */
    const createConversations = async (count: number, user = owner): Promise<string[]> => {
      const ids: string[] = [];
      for (let i = 0; i < count; i++) ids.push(await createConversation(user));
      return ids;
    };

    it("lists only the caller's conversations, newest first", async () => {
      const mine = await createConversations(3);
      const stranger = await createUserFixture();
      const theirs = await createConversations(2, stranger);

      const page = (await get('/api/v1/conversations').expect(200)).body as ConversationPage;
      expect(page.items.map((conversation) => conversation.id)).to.deep.equal([...mine].reverse());
      expect(page.next_cursor).to.equal(null);
      for (const conversation of page.items) {
        expect(conversation).to.have.all.keys('id', 'title', 'execution_status', 'event_count', 'created_at', 'updated_at', 'last_event_at', 'metrics',
        'parent_conversation_id', 'sub_conversation_ids', 'forked_from_conversation_id', 'tags', 'accumulated_cost_usd', 'accumulated_cost_micro_usd', 'unrecognized_event_count', 'delivery_refusals');
      }

      const strangersPage = (await get('/api/v1/conversations', sessionKeyOf(stranger)).expect(200)).body as ConversationPage;
      expect(strangersPage.items.map((conversation) => conversation.id)).to.deep.equal([...theirs].reverse());
    });

    it('returns the same list with X-Session-API-Key as with X-Access-Token', async () => {
      await createConversations(2);
      const byToken = await get('/api/v1/conversations', accessTokenOf(owner)).expect(200);
      const byKey = await get('/api/v1/conversations', sessionKeyOf(owner)).expect(200);
      expect(byKey.body).to.deep.equal(byToken.body);
      expect(byKey.body.items).to.have.length(2);
    });

    it('returns an empty page to a user without conversations', async () => {
      await createConversations(1);
      const newcomer = await createUserFixture();
      const page = (await get('/api/v1/conversations', accessTokenOf(newcomer)).expect(200)).body as ConversationPage;
      expect(page).to.deep.equal({ items: [], next_cursor: null });
    });

    it('pages through more conversations than the limit with next_cursor: newest first, none skipped or repeated', async () => {
      const ids = await createConversations(11);
      // Conversations created within the same millisecond are ordered by id; a few made together
      // exercise that tie-break across page boundaries.
      const burst = Array.from({ length: 4 }, () => randomUUID());
      await Promise.all(burst.map((id) => deliver(id, [minimalEvent('PauseEvent')])));

      const seen: ConversationView[] = [];
      const pageSizes: number[] = [];
      let cursor: string | null | undefined;
      do {
        const query = cursor ? `?limit=4&cursor=${encodeURIComponent(cursor)}` : '?limit=4';
        const page = (await get(`/api/v1/conversations${query}`).expect(200)).body as ConversationPage;
        pageSizes.push(page.items.length);
        seen.push(...page.items);
        cursor = page.next_cursor;
        expect(pageSizes.length, 'too many pages').to.be.at.most(10);
      } while (cursor);

      expect(pageSizes).to.deep.equal([4, 4, 4, 3]);
      const seenIds = seen.map((conversation) => conversation.id);
      expect(new Set(seenIds).size).to.equal(15);
      expect(seenIds).to.have.members([...ids, ...burst]);
      // The sequentially created ones, oldest first, appear in reverse creation order.
      expect(seenIds.filter((id) => ids.includes(id))).to.deep.equal([...ids].reverse());
      // Newest first: created_at never increases down the list.
      const created = seen.map((conversation) => Date.parse(conversation.created_at));
      for (let i = 1; i < created.length; i++) expect(created[i]).to.be.at.most(created[i - 1]!);
    });

    it('returns next_cursor null when the last page is exactly full', async () => {
      await createConversations(4);
      const first = (await get('/api/v1/conversations?limit=2').expect(200)).body as ConversationPage;
      expect(first.next_cursor).to.be.a('string');
      const second = (
        await get(`/api/v1/conversations?limit=2&cursor=${encodeURIComponent(first.next_cursor!)}`).expect(200)
      ).body as ConversationPage;
      expect(second.items).to.have.length(2);
      expect(second.next_cursor).to.equal(null);
    });

    const cursorOf = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
    for (const cursor of [
      'not-a-cursor',
      '%7B',
      cursorOf(['yesterday', randomUUID()]),
      cursorOf(['2026-01-01T00:00:00.000Z', 1]),
      cursorOf({ created_at: '2026-01-01T00:00:00.000Z' }),
    ]) {
      it(`returns 422 with loc ['query','cursor'] for the invalid cursor ${JSON.stringify(cursor)}`, async () => {
        const response = await get(`/api/v1/conversations?cursor=${cursor}`).expect(422);
        expect(response.body.detail).to.be.an('array').that.is.not.empty;
        expect(response.body.detail.map((error: { loc: unknown[] }) => error.loc)).to.deep.include(['query', 'cursor']);
      });
    }

    // A decodable cursor must not carry a non-UUID into the uuid comparison (that was a 500).
    it("returns 422 with loc ['query','cursor'] for a well-formed cursor whose id part is not a UUID", async () => {
      const response = await get(`/api/v1/conversations?cursor=${cursorOf(['2026-01-01T00:00:00.000Z', 'not-a-uuid'])}`);
      expect(response.status, JSON.stringify(response.body)).to.equal(422);
      expect(response.body.detail.map((error: { loc: unknown[] }) => error.loc)).to.deep.include(['query', 'cursor']);
    });

    for (const limit of ['0', '101']) {
      it(`returns 422 with loc ['query','limit'] for limit=${limit}`, async () => {
        const response = await get(`/api/v1/conversations?limit=${limit}`).expect(422);
        expect(response.body.detail.map((error: { loc: unknown[] }) => error.loc)).to.deep.include(['query', 'limit']);
      });
    }

    it('returns 401 {detail} without a credential', async () => {
      const response = await get('/api/v1/conversations', null).expect(401);
      expect(response.body).to.have.all.keys('detail');
    });
  });
});
