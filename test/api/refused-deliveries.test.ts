import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { parsePrometheusText, sumSamples } from '../helpers/prometheus.ts';
import { WebhookSubscriber } from '../helpers/webhook-subscriber.ts';
import { postEvents, webhookPath } from '../helpers/webhook.ts';
import { RefusedDeliveryRetention } from '../../src/retention/refused-deliveries.ts';
import { createLogger } from '../../src/logger.ts';

const sql = (text: string, values: unknown[] = []) => testDatabase().orm.em.getConnection().execute(text, values);

/** An event of a kind this contract does not know, shaped like the SDK's newer SecurityAnalysisEvent. */
function unknownKindEvent(marker: string): Record<string, unknown> {
  return {
    kind: 'FutureAnalysisEvent',
    id: randomUUID(),
    timestamp: '2026-11-27T08:00:00.000000',
    source: 'environment',
    analyzer: 'llm',
    risk: 'LOW',
    reasoning: marker,
  };
}

const message = (text: string) => minimalEvent('MessageEvent', { llm_message: { role: 'user', content: [{ type: 'text', text }] } });

interface Item {
  id: number;
  user_id: string;
  conversation_id: string;
  status: number;
  reason: string;
  detail: string;
  event_count: number | null;
  body_bytes: number | null;
  attempts: number;
  first_seen_at: string;
  last_seen_at: string;
  replayed_at: string | null;
  resolved_at: string | null;
}

describe('refused deliveries (the refusal ledger)', () => {
  let client: TestApp;
  let owner: UserFixture;
  let admin: UserFixture;
  before(async () => {
    client = await createTestApp({ metricsToken: undefined });
  });
  beforeEach(async () => {
    owner = await createUserFixture();
    admin = await createUserFixture({ superAdmin: true });
  });

  const post = (conversationId: string, body: unknown, key = owner.sessionApiKey) => postEvents(client, key, conversationId, body);
  const ownList = async (query = '', user = owner) =>
    (await client.request.get(`/api/v1/refused-deliveries${query}`).set('X-Access-Token', user.accessToken).expect(200)).body as { items: Item[]; next_cursor: string | null };
  const adminList = async (query = '') =>
    (await client.request.get(`/api/admin/refused-deliveries${query}`).set('X-Access-Token', admin.accessToken).expect(200)).body as { items: Item[]; next_cursor: string | null };

  describe('a batch the agent-server retries (its WebhookSubscriber)', () => {
    it('is recorded once with its attempts counted, visible to the owner and the admin, and the conversation says so', async () => {
      const conversationId = randomUUID();
      const marker = `payload-marker-${randomUUID()}`;
      const subscriber = new WebhookSubscriber(conversationId, async (hex, events) => (await post(hex, events)).status);
      for (const event of [message('one'), message('two'), unknownKindEvent(marker), message('three')]) await subscriber.publish(event);
      await subscriber.publish(message('four')); // the fifth event: the buffer is full, the batch goes
      for (let flush = 1; flush < 12; flush++) await subscriber.flush(); // the agent-server's timer, eleven more times
      expect(subscriber.statuses).to.have.length(48).and.satisfy((statuses: number[]) => statuses.every((s) => s === 422));
      expect(subscriber.queue).to.have.length(5); // re-queued at the front, never stored

      const [item, ...others] = (await ownList()).items;
      expect(others).to.be.empty;
      expect(item).to.include({ conversation_id: conversationId.replace(/-/g, ''), status: 422, reason: 'union_tag_invalid', event_count: 5, attempts: 48, replayed_at: null, resolved_at: null, user_id: owner.userId });
      expect(item!.detail).to.match(/^body\.2: Input tag 'FutureAnalysisEvent'/).and.not.include(marker);
      expect(item!.body_bytes).to.be.above(0);
      expect((await adminList()).items.map((i) => i.id)).to.deep.equal([item!.id]);
      expect((await ownList('', admin)).items).to.be.empty;
      await client.request.get('/api/admin/refused-deliveries').set('X-Access-Token', owner.accessToken).expect(403);

      // No conversation was created by the refused batch; once one exists it shows the refusals.
      await client.request.get(`/api/v1/conversations/${conversationId}`).set('X-Access-Token', owner.accessToken).expect(404);
      await post(conversationId, [message('created apart')]).expect(200);
      const conversation = (await client.request.get(`/api/v1/conversations/${conversationId}`).set('X-Access-Token', owner.accessToken).expect(200)).body;
      expect(conversation.delivery_refusals).to.deep.include({ count: 1, last_status: 422, last_detail: item!.detail });
      const listed = (await client.request.get('/api/v1/conversations').set('X-Access-Token', owner.accessToken).expect(200)).body;
      expect(listed.items[0].delivery_refusals.count).to.equal(1);

      // One warning per refusal naming the conversation and the reason; never the payload.
      const warnings = client.logs.filter((line) => line.includes('webhook batch refused') && line.includes(conversationId.replace(/-/g, '')));
      expect(warnings).to.have.length(48);
      expect(JSON.parse(warnings[0]!)).to.include({ level: 40, reason: 'union_tag_invalid', status: 422 });
      expect(client.logs.join('\n')).not.to.include(marker);

      const metrics = parsePrometheusText((await client.request.get('/metrics').expect(200)).text);
      expect(sumSamples(metrics, 'webhook_batches_refused_total', { status: '422', reason: 'union_tag_invalid' })).to.be.at.least(48);
    });
  });

  describe('a refusal resolving itself (the agent-server\'s own retry accepted after a policy change)', () => {
    const conversationOf = async (conversationId: string, user = owner) =>
      (await client.request.get(`/api/v1/conversations/${conversationId}`).set('X-Access-Token', user.accessToken).expect(200)).body as {
        delivery_refusals: { count: number; last_status: number } | null;
      };

    it('refused under strict, then the retry accepted under accept-unknown: the conversation no longer reports it, the ledger says resolved', async () => {
      const conversationId = randomUUID();
      const upgraded = await createTestApp({ webhookEventCompatibility: 'accept-unknown' });
      let server: TestApp = client; // the operator switches the policy: a new instance on the same database
      const subscriber = new WebhookSubscriber(conversationId, async (hex, events) => (await postEvents(server, owner.sessionApiKey, hex, events)).status);
      for (let i = 0; i < 5; i++) await subscriber.publish(message(`accepted ${i}`)); // creates the conversation
      for (const event of [message('a'), unknownKindEvent('newer'), message('b'), message('c'), message('d')]) await subscriber.publish(event);
      await subscriber.flush();
      expect(subscriber.statuses.slice(0, 1)).to.deep.equal([200]);
      expect(subscriber.statuses.slice(1)).to.have.length(8).and.satisfy((statuses: number[]) => statuses.every((s) => s === 422));
      expect(subscriber.queue).to.have.length(5);
      expect((await conversationOf(conversationId)).delivery_refusals).to.include({ count: 1, last_status: 422 });
      const [refused] = (await ownList()).items;
      expect(refused).to.include({ attempts: 8, resolved_at: null, replayed_at: null });
      expect((await ownList('?resolved=false')).items.map((i) => i.id)).to.deep.equal([refused!.id]);
      expect((await ownList('?resolved=true')).items).to.be.empty;

      server = upgraded;
      await subscriber.flush();
      expect(subscriber.statuses.at(-1)).to.equal(200);
      expect(subscriber.queue).to.be.empty;

      expect((await conversationOf(conversationId)).delivery_refusals).to.equal(null);
      const [resolved] = (await ownList()).items;
      expect(resolved).to.include({ id: refused!.id, replayed_at: null, attempts: 8 });
      expect(resolved!.resolved_at).to.be.a('string');
      expect(Date.parse(resolved!.resolved_at!)).to.be.at.least(Date.parse(resolved!.last_seen_at));
      expect((await ownList('?resolved=true')).items.map((i) => i.id)).to.deep.equal([refused!.id]);
      expect((await ownList('?resolved=false')).items).to.be.empty;
      expect((await adminList('?resolved=false')).items).to.be.empty;
      expect((await adminList()).items[0]!.resolved_at).to.equal(resolved!.resolved_at);
      const listed = (await client.request.get('/api/v1/conversations').set('X-Access-Token', owner.accessToken).expect(200)).body;
      expect(listed.items[0].delivery_refusals).to.equal(null);

      // A replay of a resolved refusal stores nothing: 200 under a policy that accepts it; under strict, that refusal, and it stays resolved.
      const replayed = await upgraded.request.post(`/api/admin/refused-deliveries/${refused!.id}/replay`).set('X-Access-Token', admin.accessToken).expect(200);
      expect(replayed.body.stored_events).to.equal(0);
      expect(replayed.body.delivery).to.include({ resolved_at: resolved!.resolved_at });
      expect(replayed.body.delivery.replayed_at).to.be.a('string');
      await client.request.post(`/api/admin/refused-deliveries/${refused!.id}/replay`).set('X-Access-Token', admin.accessToken).expect(422);
      expect((await ownList()).items[0]).to.include({ resolved_at: resolved!.resolved_at });
    });

    it('stays unresolved while only some of its events are stored, and resolves with the last', async () => {
      const conversationId = randomUUID();
      await post(conversationId, [message('exists')]).expect(200);
      const [first, second, unknown] = [message('one'), message('two'), unknownKindEvent('late')];
      await post(conversationId, [first, unknown, second]).expect(422);
      await post(conversationId, [first, second]).expect(200); // the known events, sent apart
      expect((await ownList()).items[0]).to.include({ resolved_at: null });
      expect((await conversationOf(conversationId)).delivery_refusals).to.include({ count: 1 });

      const upgraded = await createTestApp({ webhookEventCompatibility: 'accept-unknown' });
      await postEvents(upgraded, owner.sessionApiKey, conversationId, [unknown]).expect(200);
      expect((await ownList()).items[0]!.resolved_at).to.be.a('string');
      expect((await conversationOf(conversationId)).delivery_refusals).to.equal(null);
    });

    it('counts only the unresolved refusals of a conversation, the latest of them as last', async () => {
      const conversationId = randomUUID();
      await post(conversationId, [message('exists')]).expect(200);
      const later = unknownKindEvent('still refused');
      await post(conversationId, [unknownKindEvent('will arrive')]).expect(422);
      const [arriving] = (await ownList()).items;
      await post(conversationId, [message('m'), later]).expect(422);
      expect((await conversationOf(conversationId)).delivery_refusals).to.include({ count: 2 });
      const upgraded = await createTestApp({ webhookEventCompatibility: 'accept-unknown' });
      await client.request.post(`/api/admin/refused-deliveries/${arriving!.id}/replay`).set('X-Access-Token', admin.accessToken).expect(422);
      await upgraded.request.post(`/api/admin/refused-deliveries/${arriving!.id}/replay`).set('X-Access-Token', admin.accessToken).expect(200);
      const summary = (await conversationOf(conversationId)).delivery_refusals;
      expect(summary).to.include({ count: 1, last_status: 422 });
      expect((await ownList('?resolved=false')).items.map((i) => i.event_count)).to.deep.equal([2]);
    });

    it('is judged in the refusal\'s own user\'s conversation only: the same events stored by another user resolve nothing', async () => {
      const conversationId = randomUUID();
      const other = await createUserFixture();
      await post(conversationId, [message('theirs')], other.sessionApiKey).expect(200); // the other user's conversation
      const events = [message('same id'), unknownKindEvent('same id too')];
      await post(conversationId, events).expect(422); // refused before the owner check: kept for the owner's key
      const upgraded = await createTestApp({ webhookEventCompatibility: 'accept-unknown' });
      await postEvents(upgraded, other.sessionApiKey, conversationId, events).expect(200);
      expect((await ownList()).items[0]).to.include({ resolved_at: null });
      expect((await conversationOf(conversationId, other)).delivery_refusals).to.equal(null);
    });

    it('never resolves a body that is not a JSON array of events with ids', async () => {
      const conversationId = randomUUID();
      await post(conversationId, [message('exists')]).expect(200);
      await post(conversationId, '[{"kind": "MessageEvent"').expect(422);
      await post(conversationId, [{ kind: 'FutureAnalysisEvent', timestamp: '2026-11-27T08:00:00.000000' }]).expect(422);
      const [{ n }] = (await sql('select count(*)::int as n from refused_deliveries where event_ids is null')) as [{ n: number }];
      expect(n).to.equal(2);
      expect((await ownList('?resolved=true')).items).to.be.empty;
      expect((await conversationOf(conversationId)).delivery_refusals).to.include({ count: 2 });
    });
  });

  describe('GET /api/v1/refused-deliveries', () => {
    it('filters by conversation (either UUID form) and since, newest first, a page at a time', async () => {
      const [a, b] = [randomUUID(), randomUUID()];
      for (let i = 0; i < 3; i++) await post(a, [unknownKindEvent(`a${i}`)]).expect(422);
      await post(b, [unknownKindEvent('b')]).expect(422);
      const all = await ownList();
      expect(all.items.map((i) => i.conversation_id)).to.deep.equal([b, a, a, a]);
      expect((await ownList(`?conversation_id=${a.replace(/-/g, '').toUpperCase()}`)).items).to.have.length(3);
      expect((await ownList(`?since=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`)).items).to.be.empty;
      const first = await ownList('?limit=3');
      expect(first.items).to.have.length(3);
      const second = await ownList(`?limit=3&cursor=${first.next_cursor}`);
      expect(second.items.map((i) => i.id)).to.deep.equal([all.items[3]!.id]);
      expect(second.next_cursor).to.equal(null);
      await client.request.get(`/api/v1/refused-deliveries?conversation_id=${a}&cursor=${first.next_cursor}`).set('X-Access-Token', owner.accessToken).expect(422);
      await client.request.get('/api/v1/refused-deliveries?limit=101').set('X-Access-Token', owner.accessToken).expect(422);
      await post(b, [message('now it exists')]).expect(200);
      const other = await createUserFixture();
      await client.request.get(`/api/v1/refused-deliveries?conversation_id=${b}`).set('X-Access-Token', other.accessToken).expect(403);
      await client.request.get('/api/v1/refused-deliveries').expect(401);
    });

    it('keeps a 401 and a 403 out of the ledger', async () => {
      const conversationId = randomUUID();
      await post(conversationId, [message('mine')]).expect(200);
      const other = await createUserFixture();
      await post(conversationId, [message('theirs')], other.sessionApiKey).expect(403);
      await post(conversationId, [message('nobody')], 'sk-oh-not-a-key').expect(401);
      expect((await adminList()).items).to.be.empty;
    });
  });

  describe('POST /api/admin/refused-deliveries/{refused_delivery_id}/replay', () => {
    it('stores a batch refused under a lower limit once the limit is raised; a second replay stores nothing', async () => {
      const conversationId = randomUUID();
      const small = await createTestApp({ bodyLimitBytes: 4096, webhookSingleEventLimitBytes: 65_536 });
      const events = [message('x'.repeat(3000)), message('y'.repeat(3000))];
      const refused = await postEvents(small, owner.sessionApiKey, conversationId, events).expect(413);
      expect(refused.body.detail).to.match(/more than one event may hold at most 4096 bytes/);
      const [item] = (await adminList()).items;
      expect(item).to.include({ status: 413, reason: 'batch_too_large', event_count: 2 });

      const replayed = await client.request.post(`/api/admin/refused-deliveries/${item!.id}/replay`).set('X-Access-Token', admin.accessToken).expect(200);
      expect(replayed.body.stored_events).to.equal(2);
      expect(replayed.body.delivery.replayed_at).to.be.a('string');
      const stored = (await client.request.get(`/api/v1/conversations/${conversationId}/events`).set('X-Access-Token', owner.accessToken).expect(200)).body;
      expect(stored.items.map((e: { event: { id: string } }) => e.event.id)).to.deep.equal(events.map((e) => e.id));
      const again = await client.request.post(`/api/admin/refused-deliveries/${item!.id}/replay`).set('X-Access-Token', admin.accessToken).expect(200);
      expect(again.body.stored_events).to.equal(0);
    });

    it('stores a batch refused under strict, flagged, once the instance runs accept-unknown', async () => {
      const conversationId = randomUUID();
      const events = [message('before'), unknownKindEvent('after the upgrade')];
      await post(conversationId, events).expect(422);
      const [item] = (await ownList()).items;
      expect(item).to.include({ status: 422, reason: 'union_tag_invalid', event_count: 2 });

      const upgraded = await createTestApp({ webhookEventCompatibility: 'accept-unknown' });
      const replayed = await upgraded.request.post(`/api/admin/refused-deliveries/${item!.id}/replay`).set('X-Access-Token', admin.accessToken).expect(200);
      expect(replayed.body.stored_events).to.equal(2);
      const stored = (await client.request.get(`/api/v1/conversations/${conversationId}/events`).set('X-Access-Token', owner.accessToken).expect(200)).body;
      expect(stored.items.map((e: { event: { id: string } }) => e.event.id)).to.deep.equal(events.map((e) => e.id));
      expect(stored.items[0].unrecognized).to.equal(undefined);
      expect(stored.items[1].unrecognized).to.deep.equal({ kind: true, properties: [] });
    });

    it('answers the new 422 for a body still invalid, and the item says so', async () => {
      const conversationId = randomUUID();
      await post(conversationId, '[{"kind": "MessageEvent"').expect(422);
      const [item] = (await ownList()).items;
      expect(item).to.include({ reason: 'json_invalid', event_count: null });
      await post(conversationId, [unknownKindEvent('replay')]).expect(422);
      const [unknown] = (await ownList()).items;
      const response = await client.request.post(`/api/admin/refused-deliveries/${unknown!.id}/replay`).set('X-Access-Token', admin.accessToken).expect(422);
      expect(response.body.detail[0]).to.include({ type: 'union_tag_invalid' });
      expect((await ownList()).items[0]).to.include({ id: unknown!.id, status: 422, replayed_at: null, attempts: 1 });
    });

    it('answers 409 for a refusal whose body was never read, 404 for no such refusal, 403 without the permission', async () => {
      const small = await createTestApp({ bodyLimitBytes: 1024, webhookSingleEventLimitBytes: 2048 });
      await postEvents(small, owner.sessionApiKey, randomUUID(), [message('z'.repeat(4000))]).expect(413);
      const [item] = (await adminList()).items;
      expect(item).to.include({ reason: 'body_too_large', event_count: null });
      expect(item!.body_bytes).to.be.above(4000);
      await client.request.post(`/api/admin/refused-deliveries/${item!.id}/replay`).set('X-Access-Token', admin.accessToken).expect(409);
      await client.request.post('/api/admin/refused-deliveries/999999/replay').set('X-Access-Token', admin.accessToken).expect(404);
      await client.request.post(`/api/admin/refused-deliveries/${item!.id}/replay`).set('X-Access-Token', owner.accessToken).expect(403);
      await client.request.post('/api/admin/refused-deliveries/0/replay').set('X-Access-Token', admin.accessToken).expect(422);
    });
  });

  describe('recording', () => {
    it('never turns a refusal into a 500: a ledger that cannot be written is logged and the 422 still goes out', async () => {
      await sql('alter table refused_deliveries rename to refused_deliveries_away');
      try {
        const response = await post(randomUUID(), [unknownKindEvent('x')]).expect(422);
        expect(response.body.detail[0].type).to.equal('union_tag_invalid');
      } finally {
        await sql('alter table refused_deliveries_away rename to refused_deliveries');
      }
      expect(client.logs.some((line) => line.includes('the refusal ledger could not record it'))).to.equal(true);
    });

    it('stores a conversation.delivery_refused message at most once per conversation an hour', async () => {
      await client.request
        .post('/api/v1/webhook-endpoints')
        .set('X-Access-Token', owner.accessToken)
        .send({ url: 'https://hooks.example.com/refusals', event_types: ['conversation.delivery_refused'] })
        .expect(201);
      const conversationId = randomUUID();
      const messages = async () =>
        (await sql(`select data from webhook_messages where type = 'conversation.delivery_refused' and conversation_id = ?`, [conversationId])) as { data: Record<string, unknown> }[];
      await post(conversationId, [unknownKindEvent('1')]).expect(422);
      await post(conversationId, [unknownKindEvent('2')]).expect(422);
      await post(conversationId, [unknownKindEvent('2')]).expect(422);
      const sent = await messages();
      expect(sent).to.have.length(1);
      expect(sent[0]!.data).to.include({ conversation_id: conversationId, status: 422, reason: 'union_tag_invalid' });
      // An hour later (the notice's time moved back), the next refusal is told again.
      await sql(`update delivery_refusal_notices set sent_at = now() - interval '61 minutes'`);
      await post(conversationId, [unknownKindEvent('3')]).expect(422);
      expect(await messages()).to.have.length(2);
    });

    it('adds nothing for an accepted batch', async () => {
      await post(randomUUID(), [message('fine')]).expect(200);
      const [{ n }] = (await sql('select count(*)::int as n from refused_deliveries')) as [{ n: number }];
      expect(n).to.equal(0);
    });
  });

  describe('the hourly sweep: retention (REFUSED_DELIVERY_RETENTION_DAYS) and resolutions kept', () => {
    it('deletes refusals not seen for the retention period and keeps the others', async () => {
      await post(randomUUID(), [unknownKindEvent('old')]).expect(422);
      await post(randomUUID(), [unknownKindEvent('recent')]).expect(422);
      const [recent, old] = (await adminList()).items;
      await sql(`update refused_deliveries set last_seen_at = now() - interval '15 days' where id = ?`, [old!.id]);
      await sql(`update refused_deliveries set last_seen_at = now() - interval '13 days' where id = ?`, [recent!.id]);
      const deleted = await new RefusedDeliveryRetention(testDatabase().orm.em, 14, createLogger('silent')).sweep();
      expect(deleted).to.equal(1);
      expect((await adminList()).items.map((i) => i.id)).to.deep.equal([recent!.id]);
    });

    it('keeps resolved_at of the refusals resolved since, so that reads no longer probe their events', async () => {
      const conversationId = randomUUID();
      await post(conversationId, [message('exists')]).expect(200);
      const arriving = unknownKindEvent('arrives');
      await post(conversationId, [arriving]).expect(422);
      await post(conversationId, [unknownKindEvent('never')]).expect(422);
      const upgraded = await createTestApp({ webhookEventCompatibility: 'accept-unknown' });
      await postEvents(upgraded, owner.sessionApiKey, conversationId, [arriving]).expect(200);
      const [open, resolved] = (await ownList()).items;
      expect(open!.resolved_at).to.equal(null);
      expect(resolved!.resolved_at).to.be.a('string');
      const kept = async () => (await sql('select id, resolved_at from refused_deliveries where resolved_at is not null')) as { id: string; resolved_at: Date | string }[];
      expect(await kept()).to.be.empty; // found when read, not kept yet

      await new RefusedDeliveryRetention(testDatabase().orm.em, 14, createLogger('silent')).sweep();
      const rows = await kept();
      expect(rows.map((row) => Number(row.id))).to.deep.equal([resolved!.id]);
      expect(new Date(rows[0]!.resolved_at).toISOString()).to.equal(resolved!.resolved_at);
      expect((await ownList()).items.map((i) => i.resolved_at)).to.deep.equal([null, resolved!.resolved_at]);
      expect((await ownList('?resolved=false')).items.map((i) => i.id)).to.deep.equal([open!.id]);
      const conversation = (await client.request.get(`/api/v1/conversations/${conversationId}`).set('X-Access-Token', owner.accessToken).expect(200)).body;
      expect(conversation.delivery_refusals).to.include({ count: 1 });
    });
  });
});
