import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { DeliveryWorker } from '../../src/outbound/delivery-worker.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { outboundApp, Receiver, type OutboundApp } from '../helpers/outbound.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';
import { waitFor } from '../helpers/server-process.ts';
import { postEvents } from '../helpers/webhook.ts';

interface Message {
  id: string;
  type: string;
  state: string;
}

describe('outbound webhooks: filters by conversation and tag', function () {
  this.timeout(60_000);

  let app: OutboundApp;
  let user: UserFixture;
  let receiver: Receiver;
  const started: DeliveryWorker[] = [];

  before(async () => {
    app = await outboundApp();
  });

  beforeEach(async () => {
    user = await createUserFixture();
    receiver = await new Receiver().start();
  });

  afterEach(async () => {
    await Promise.all(started.splice(0).map((worker) => worker.stop(1_000)));
    await receiver.stop();
  });

  const auth = () => ({ 'X-Access-Token': user.accessToken });

  async function createEndpoint(body: Record<string, unknown>) {
    const response = await app.request.post('/api/v1/webhook-endpoints').set(auth()).send(body);
    expect(response.status, JSON.stringify(response.body)).to.equal(201);
    rememberSecret(response.body.secret);
    return response.body as { id: string; conversation_ids: string[] | null; tags: string[] | null };
  }

  async function messages(endpointId: string): Promise<Message[]> {
    return (await app.request.get(`/api/v1/webhook-endpoints/${endpointId}/messages?limit=200`).set(auth()).expect(200)).body.items;
  }

  /** The conversations of the `conversation.events` messages the receiver got at `?n=<n>`. */
  const conversationsAt = (n: string) =>
    receiver.requests
      .filter((r) => r.url === `/hook?n=${n}`)
      .map((r) => JSON.parse(r.body))
      .filter((b) => b.type === 'conversation.events')
      .map((b) => b.data.conversation_id as string)
      .sort();

  const info = (id: string, tags: Record<string, string>) =>
    app.request
      .post('/api/v1/webhooks/conversations')
      .set('X-Session-API-Key', user.sessionApiKey)
      .send({ id, title: 'Untitled', execution_status: 'running', updated_at: new Date().toISOString(), tags })
      .expect(201);

  it('conversation_ids: only messages about those conversations; an endpoint without the filter gets all', async () => {
    const [c1, c2, c3] = [randomUUID(), randomUUID(), randomUUID()];
    const only = await createEndpoint({ url: `${receiver.url}?n=only`, conversation_ids: [c1, c2.toUpperCase()] });
    expect(only.conversation_ids).to.deep.equal([c1, c2]);
    const every = await createEndpoint({ url: `${receiver.url}?n=every` });
    await app.worker.start();
    started.push(app.worker);
    for (const c of [c1, c2, c3]) await postEvents(app, user.sessionApiKey, c, [minimalEvent('MessageEvent', { id: randomUUID() })]).expect(200);
    expect(await waitFor(async () => (await messages(every.id)).filter((m) => m.state === 'succeeded').length === 6, 15_000)).to.equal(true);
    expect(await waitFor(async () => (await messages(only.id)).filter((m) => m.state === 'succeeded').length === 4, 15_000)).to.equal(true);
    expect(conversationsAt('only')).to.deep.equal([c1, c2].sort());
    expect(conversationsAt('every')).to.deep.equal([c1, c2, c3].sort());
    // A message about no conversation (a checkout) does not match a conversation filter.
    await testDatabase().orm.em.getConnection().execute(`select webhook_enqueue(?, null, 'checkout.completed', '{"session_id": "cs_1", "amount_usd": 5}'::jsonb)`, [user.userId]);
    expect(await waitFor(async () => (await messages(every.id)).filter((m) => m.state === 'succeeded').length === 7, 15_000)).to.equal(true);
    expect((await messages(only.id)).map((m) => m.type).sort()).to.deep.equal(['conversation.created', 'conversation.created', 'conversation.events', 'conversation.events']);
  });

  it('tags: only conversations carrying every tag, read when the message is fanned out', async () => {
    const [infra, web, untagged] = [randomUUID(), randomUUID(), randomUUID()];
    const tagged = await createEndpoint({ url: `${receiver.url}?n=tagged`, event_types: ['conversation.events'], tags: ['team:infra', 'env:prod:eu'] });
    expect(tagged.tags).to.deep.equal(['env:prod:eu', 'team:infra']);
    await info(infra, { team: 'infra', env: 'prod:eu', owner: 'ana' });
    await info(web, { team: 'web', env: 'prod:eu' });
    await app.worker.start();
    started.push(app.worker);
    for (const c of [infra, web, untagged]) await postEvents(app, user.sessionApiKey, c, [minimalEvent('MessageEvent', { id: randomUUID() })]).expect(200);
    expect(await waitFor(() => conversationsAt('tagged').length === 1, 15_000)).to.equal(true);
    // Every message of the three has been fanned out once the worker found nothing more to do.
    expect(await waitFor(async () => (await app.worker.fanOutPending()) === 0, 5_000)).to.equal(true);
    expect(conversationsAt('tagged')).to.deep.equal([infra]);
    expect((await messages(tagged.id)).length).to.equal(1);
  });

  it('PATCH changes and clears the filters; a tag key given twice is a 422', async () => {
    const c1 = randomUUID();
    const endpoint = await createEndpoint({ url: receiver.url, tags: ['team:infra'] });
    const changed = await app.request.patch(`/api/v1/webhook-endpoints/${endpoint.id}`).set(auth()).send({ conversation_ids: [c1], tags: null }).expect(200);
    expect(changed.body).to.deep.include({ conversation_ids: [c1], tags: null });
    const twice = await app.request.patch(`/api/v1/webhook-endpoints/${endpoint.id}`).set(auth()).send({ tags: ['team:a', 'team:b'] }).expect(422);
    expect(twice.body.detail[0]).to.deep.include({ loc: ['body', 'tags', 1], msg: 'The tag key team is given twice' });
    await app.request.post('/api/v1/webhook-endpoints').set(auth()).send({ url: receiver.url, tags: ['no-colon'] }).expect(422);
    await app.request.post('/api/v1/webhook-endpoints').set(auth()).send({ url: receiver.url, conversation_ids: ['not-a-uuid'] }).expect(422);
  });
});

describe('GET /api/v1/webhook-event-types', function () {
  this.timeout(60_000);

  let app: OutboundApp;
  before(async () => {
    app = await outboundApp();
  });

  it('lists every WebhookEventType with a JSON Schema its example and real deliveries validate against', async () => {
    const user = await createUserFixture();
    const response = await app.request.get('/api/v1/webhook-event-types').set('X-Access-Token', user.accessToken).expect(200);
    const items = response.body.items as { type: string; schema: object; example: { type: string }; operational: boolean }[];
    const { loadSpec } = await import('../../src/api/openapi.ts');
    const enumValues = (loadSpec().components!.schemas!.WebhookEventType as { enum: string[] }).enum;
    expect(items.map((i) => i.type)).to.deep.equal(enumValues);
    const ajv = new Ajv2020({ strict: false });
    addFormats.default(ajv);
    for (const item of items) {
      const validate = ajv.compile(item.schema);
      expect(validate(item.example), `${item.type}: ${JSON.stringify(validate.errors)}`).to.equal(true);
      expect(item.example.type).to.equal(item.type);
      expect(validate({ ...item.example, type: 'something.else' }), item.type).to.equal(false);
    }

    const receiver = await new Receiver().start();
    try {
      const created = await app.request.post('/api/v1/webhook-endpoints').set('X-Access-Token', user.accessToken).send({ url: receiver.url }).expect(201);
      rememberSecret(created.body.secret);
      await app.worker.start();
      await app.request.post(`/api/v1/webhook-endpoints/${created.body.id}/test`).set('X-Access-Token', user.accessToken).expect(202);
      await postEvents(app, user.sessionApiKey, randomUUID(), [minimalEvent('PauseEvent', { id: randomUUID() })]).expect(200);
      expect(await waitFor(() => new Set(receiver.requests.map((r) => JSON.parse(r.body).type)).size >= 4, 15_000)).to.equal(true);
      for (const request of receiver.requests) {
        const body = JSON.parse(request.body) as { type: string };
        const validate = ajv.compile(items.find((i) => i.type === body.type)!.schema);
        expect(validate(body), `${body.type}: ${JSON.stringify(validate.errors)}`).to.equal(true);
      }
    } finally {
      await app.worker.stop(1_000);
      await receiver.stop();
    }
  });

  it('returns 401 without an access token', async () => {
    await app.request.get('/api/v1/webhook-event-types').expect(401);
  });
});
