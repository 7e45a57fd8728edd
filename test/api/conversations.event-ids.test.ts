import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { postEvents } from '../helpers/webhook.ts';

interface EventPage {
  items: { seq: number; event: { id: string; kind: string } }[];
  next_cursor: string | null;
}

/** Ids that are words of the paths under `…/events/`, which those literal paths answer first. */
const PATH_WORDS = ['count', 'stream', 'stream-tickets'];

describe('GET /api/v1/conversations/{conversation_id}/events?id=…: events by their own ids', () => {
  let client: TestApp;
  let owner: UserFixture;
  let conversationId: string;
  before(async () => {
    client = await createTestApp();
  });
  beforeEach(async () => {
    owner = await createUserFixture();
    conversationId = randomUUID();
    const events = [
      { ...minimalEvent('PauseEvent'), id: 'count' },
      { ...minimalEvent('MessageEvent'), id: 'plain-id' },
      { ...minimalEvent('PauseEvent'), id: 'stream' },
      { ...minimalEvent('MessageEvent'), id: 'stream-tickets' },
    ];
    await postEvents(client, owner.sessionApiKey, conversationId, events).expect(200);
  });

  const events = (query: string) =>
    client.request.get(`/api/v1/conversations/${conversationId}/events?${query}`).set('X-Access-Token', owner.accessToken);
  const ids = (page: EventPage) => page.items.map((item) => item.event.id);

  it('the literal paths win: …/events/count counts and …/events/stream is the live stream, not the events so named', async () => {
    const count = await client.request.get(`/api/v1/conversations/${conversationId}/events/count`).set('X-Access-Token', owner.accessToken).expect(200);
    expect(count.body).to.deep.equal({ count: 4 });
  });

  for (const word of PATH_WORDS) {
    it(`?id=${word} returns the event whose id is ${word}`, async () => {
      const page = (await events(`id=${encodeURIComponent(word)}`).expect(200)).body as EventPage;
      expect(ids(page)).to.deep.equal([word]);
      expect(page.next_cursor).to.equal(null);
    });
  }

  it('a repeated id returns each of them once, in sequence order, whatever order they were asked in', async () => {
    const page = (await events('id=stream&id=count&id=stream&id=plain-id').expect(200)).body as EventPage;
    expect(ids(page)).to.deep.equal(['count', 'plain-id', 'stream']);
    expect(page.items.map((item) => item.seq)).to.deep.equal([1, 2, 3]);
  });

  it('an id the conversation does not hold is simply not among the items', async () => {
    expect(ids((await events('id=no-such-event').expect(200)).body)).to.deep.equal([]);
    expect(ids((await events('id=no-such-event&id=count').expect(200)).body)).to.deep.equal(['count']);
  });

  it('combines with the other filters (AND) and with order', async () => {
    expect(ids((await events('id=count&id=plain-id&id=stream&kind=PauseEvent&order=desc').expect(200)).body)).to.deep.equal(['stream', 'count']);
  });

  it('pages with a cursor bound to the ids asked for', async () => {
    const first = (await events('id=count&id=stream&limit=1').expect(200)).body as EventPage;
    expect(ids(first)).to.deep.equal(['count']);
    const second = (await events(`id=count&id=stream&limit=1&cursor=${first.next_cursor}`).expect(200)).body as EventPage;
    expect(ids(second)).to.deep.equal(['stream']);
    const foreign = await events(`id=count&limit=1&cursor=${first.next_cursor}`).expect(422);
    expect(foreign.body.detail[0].loc).to.deep.equal(['query', 'cursor']);
  });

  it('…/events/count takes id too and counts what the list yields', async () => {
    const count = await client.request
      .get(`/api/v1/conversations/${conversationId}/events/count?id=count&id=stream&id=missing`)
      .set('X-Access-Token', owner.accessToken)
      .expect(200);
    expect(count.body).to.deep.equal({ count: 2 });
  });

  it('up to 100 ids; more, or an empty or over-long one, is a 422 on id', async () => {
    const many = Array.from({ length: 101 }, (_, i) => `id=e${i}`).join('&');
    for (const query of [many, 'id=', `id=${'x'.repeat(256)}`]) {
      const refused = await events(query).expect(422);
      expect(refused.body.detail[0].loc.slice(0, 2), query.slice(0, 40)).to.deep.equal(['query', 'id']);
    }
    const hundred = [...Array.from({ length: 99 }, (_, i) => `id=e${i}`), 'id=count'].join('&');
    expect(ids((await events(hundred).expect(200)).body)).to.deep.equal(['count']);
  });

  it('another user gets 403, as on every operation of the conversation', async () => {
    const stranger = await createUserFixture();
    await client.request.get(`/api/v1/conversations/${conversationId}/events?id=count`).set('X-Access-Token', stranger.accessToken).expect(403);
  });
});
