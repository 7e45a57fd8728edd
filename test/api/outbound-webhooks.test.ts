import type http from 'node:http';
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { migrate } from '../../src/db/database.ts';
import type { DeliveryWorker } from '../../src/outbound/delivery-worker.ts';
import { isForbiddenAddress } from '../../src/outbound/target-guard.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testConfig, testDatabase } from '../helpers/hooks.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';
import { killAllProcesses, startServerProcess, waitFor } from '../helpers/server-process.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { postEvents, webhookPath } from '../helpers/webhook.ts';
import { eventsMade, outboundApp, Receiver, verifyDelivery, type OutboundApp } from '../helpers/outbound.ts';

const started: DeliveryWorker[] = [];

async function startWorker(app: OutboundApp): Promise<void> {
  await app.worker.start();
  started.push(app.worker);
}

describe('outbound webhooks', function () {
  this.timeout(60_000);

  let app: OutboundApp;
  // Apps with stricter settings, built once (building compiles the contract's validators).
  let httpsOnly: OutboundApp | undefined;
  let publicOnly: OutboundApp | undefined;
  let user: UserFixture;
  let receiver: Receiver;

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
    await killAllProcesses();
  });

  const auth = (u: UserFixture = user) => ({ 'X-Access-Token': u.accessToken });

  async function createEndpoint(body: Record<string, unknown>, u: UserFixture = user, on: OutboundApp = app) {
    const response = await on.request.post('/api/v1/webhook-endpoints').set(auth(u)).send(body);
    expect(response.status, JSON.stringify(response.body)).to.equal(201);
    rememberSecret(response.body.secret);
    return response.body as { id: string; secret: string };
  }

  async function deliver(conversationId: string, events: Record<string, unknown>[], on: OutboundApp = app) {
    await postEvents(on, user.sessionApiKey, conversationId, events).expect(200);
  }

  async function messages(endpointId: string) {
    return (await app.request.get(`/api/v1/webhook-endpoints/${endpointId}/messages`).set(auth()).expect(200)).body.items as {
      id: string;
      type: string;
      state: string;
      attempts: number;
      last_status_code: number | null;
      last_error: string | null;
    }[];
  }

  async function attempts(endpointId: string, messageId: string) {
    return (await app.request.get(`/api/v1/webhook-endpoints/${endpointId}/messages/${messageId}/attempts`).set(auth()).expect(200)).body
      .items as { attempt: number; status_code: number | null; error: string | null }[];
  }

  const verify = (secret: string, request: { headers: http.IncomingHttpHeaders; body: string }) => verifyDelivery(secret, request);

  describe('POST /api/v1/webhook-endpoints', () => {
    it('returns 201 with a whsec_ secret of 24 random bytes, stored encrypted and never listed', async () => {
      const created = await createEndpoint({ url: 'https://hooks.example.com/x', description: 'chat', event_types: ['conversation.finished'] });
      expect(created.secret).to.match(/^whsec_[A-Za-z0-9+/]{32}$/);
      expect(Buffer.from(created.secret.slice(6), 'base64')).to.have.length(24);
      expect(created).to.include({ url: 'https://hooks.example.com/x', description: 'chat', disabled: false, conversation_id: null });
      const [stored] = await testDatabase().orm.em.getConnection().execute('select secret from webhook_endpoints where id = ?', [created.id]);
      expect(stored!.secret).to.match(/^v1:/).and.not.include(created.secret.slice(6));
      const listed = await app.request.get('/api/v1/webhook-endpoints').set(auth()).expect(200);
      expect(listed.body.items).to.have.length(1);
      expect(listed.body.items[0]).to.not.have.property('secret');
    });

    for (const [label, url] of [
      ['a relative URL', '/hooks'],
      ['a URL that is not one', 'not a url'],
      ['an ftp URL', 'ftp://hooks.example.com/'],
      ['an http URL while only https is allowed', 'http://hooks.example.com/'],
      ['a URL with credentials', 'https://user:pw@hooks.example.com/'],
      ['a URL with a fragment', 'https://hooks.example.com/#x'],
    ]) {
      it(`returns 422 for ${label}, storing nothing`, async () => {
        const strict = (httpsOnly ??= await outboundApp({ allowHttp: false }));
        const response = await strict.request.post('/api/v1/webhook-endpoints').set(auth()).send({ url }).expect(422);
        expect(response.body.detail[0].loc).to.deep.equal(['body', 'url']);
        const rows = await testDatabase().orm.em.getConnection().execute('select count(*)::integer as n from webhook_endpoints');
        expect(rows[0]!.n).to.equal(0);
      });
    }

    it('returns 422 for an unknown message type', async () => {
      const response = await app.request
        .post('/api/v1/webhook-endpoints')
        .set(auth())
        .send({ url: 'https://hooks.example.com/', event_types: ['conversation.deleted'] })
        .expect(422);
      expect(response.body.detail[0].loc.slice(0, 2)).to.deep.equal(['body', 'event_types']);
    });

    it('returns 409 beyond OUTBOUND_WEBHOOK_MAX_ENDPOINTS, storing nothing', async () => {
      const small = await outboundApp({ maxEndpoints: 2 });
      await createEndpoint({ url: 'https://a.example.com/' }, user, small);
      await createEndpoint({ url: 'https://b.example.com/' }, user, small);
      const response = await small.request.post('/api/v1/webhook-endpoints').set(auth()).send({ url: 'https://c.example.com/' }).expect(409);
      expect(response.body.detail).to.equal('At most 2 webhook endpoints per user');
      expect((await app.request.get('/api/v1/webhook-endpoints').set(auth())).body.items).to.have.length(2);
    });

    it('returns 401 without an access token', async () => {
      await app.request.post('/api/v1/webhook-endpoints').send({ url: 'https://hooks.example.com/' }).expect(401);
    });
  });

  describe('GET, PATCH, DELETE /api/v1/webhook-endpoints/{endpoint_id}', () => {
    it('returns 404 for another user\'s endpoint on every operation', async () => {
      const other = await createUserFixture();
      const { id } = await createEndpoint({ url: 'https://hooks.example.com/' }, other);
      await app.request.get(`/api/v1/webhook-endpoints/${id}`).set(auth()).expect(404);
      await app.request.patch(`/api/v1/webhook-endpoints/${id}`).set(auth()).send({ disabled: true }).expect(404);
      await app.request.delete(`/api/v1/webhook-endpoints/${id}`).set(auth()).expect(404);
      await app.request.post(`/api/v1/webhook-endpoints/${id}/rotate-secret`).set(auth()).expect(404);
      await app.request.post(`/api/v1/webhook-endpoints/${id}/test`).set(auth()).expect(404);
      await app.request.get(`/api/v1/webhook-endpoints/${id}/messages`).set(auth()).expect(404);
      await app.request.get(`/api/v1/webhook-endpoints/${id}`).set(auth(other)).expect(200);
    });

    it('changes url, description, event_types and disabled; 204 on delete, then 404', async () => {
      const { id } = await createEndpoint({ url: 'https://hooks.example.com/' });
      const changed = await app.request
        .patch(`/api/v1/webhook-endpoints/${id}`)
        .set(auth())
        .send({ url: 'https://other.example.com/in', description: 'd', event_types: ['webhook.test'], disabled: true })
        .expect(200);
      expect(changed.body).to.include({ url: 'https://other.example.com/in', description: 'd', disabled: true });
      expect(changed.body.event_types).to.deep.equal(['webhook.test']);
      await app.request.patch(`/api/v1/webhook-endpoints/${id}`).set(auth()).send({ url: 'ftp://x.example.com/' }).expect(422);
      await app.request.delete(`/api/v1/webhook-endpoints/${id}`).set(auth()).expect(204);
      await app.request.get(`/api/v1/webhook-endpoints/${id}`).set(auth()).expect(404);
    });

    it('appends an audit row for each change (created, updated, secret rotated, deleted), never the secret', async () => {
      const { id, secret } = await createEndpoint({ url: 'https://hooks.example.com/' });
      await app.request.patch(`/api/v1/webhook-endpoints/${id}`).set(auth()).send({ disabled: true }).expect(200);
      const rotated = await app.request.post(`/api/v1/webhook-endpoints/${id}/rotate-secret`).set(auth()).expect(200);
      rememberSecret(rotated.body.secret);
      await app.request.delete(`/api/v1/webhook-endpoints/${id}`).set(auth()).expect(204);
      const rows = (await testDatabase().orm.em.getConnection().execute(
        "select actor, action, target_id, summary::text as summary from audit_log where target_type = 'webhook_endpoint' order by id",
      )) as { actor: string; action: string; target_id: string; summary: string }[];
      expect(rows.map((row) => [row.actor, row.action, row.target_id])).to.deep.equal(
        ['created', 'updated', 'secret_rotated', 'deleted'].map((verb) => [user.userId, `webhook_endpoint.${verb}`, id]),
      );
      for (const row of rows) expect(row.summary).to.not.include(secret).and.not.include(rotated.body.secret);
    });
  });

  describe('delivery', () => {
    it('signs conversation.created and conversation.events (a message per batch made apart, the events as stored), verified by standardwebhooks', async () => {
      const { id, secret } = await createEndpoint({ url: receiver.url });
      await startWorker(app);
      const conversationId = randomUUID();
      const batch = [minimalEvent('MessageEvent', { id: randomUUID() }), minimalEvent('PauseEvent', { id: randomUUID() })];
      await deliver(conversationId, batch);
      expect(await eventsMade(conversationId)).to.equal(true);
      await deliver(conversationId, [minimalEvent('MessageEvent', { id: randomUUID() })]);
      expect(await waitFor(() => receiver.ofType('conversation.events').length >= 2 && receiver.ofType('conversation.created').length >= 1, 15_000)).to.equal(true);
      for (const request of receiver.requests) verify(secret, request);
      const [first, second] = receiver.ofType('conversation.events').sort((a, b) => (a.data.from_seq as number) - (b.data.from_seq as number));
      expect(first!.data).to.include({ conversation_id: conversationId, from_seq: 1, to_seq: 2 });
      expect((first!.data.events as { id: string }[]).map((e) => e.id)).to.deep.equal(batch.map((e) => e.id));
      expect(second!.data).to.include({ from_seq: 3, to_seq: 3 });
      expect(receiver.ofType('conversation.created')[0]!.data.conversation_id).to.equal(conversationId);
      // Paused by the PauseEvent: a status change from nothing to paused.
      expect(await waitFor(() => receiver.ofType('conversation.status_changed').length === 1, 10_000)).to.equal(true);
      expect(receiver.ofType('conversation.status_changed')[0]!.data).to.include({ from: null, to: 'paused' });
      // The receiver has the last request a moment before the worker records its success.
      const delivered = (m: { state: string; attempts: number; last_status_code: number | null }) => m.state === 'succeeded' && m.attempts === 1 && m.last_status_code === 200;
      expect(await waitFor(async () => (await messages(id)).every(delivered), 10_000)).to.equal(true);
      expect(await messages(id)).to.have.length(4);
    });

    it('sends conversation.finished with title, event count and the last agent message; event_types filters', async () => {
      const { secret } = await createEndpoint({ url: receiver.url, event_types: ['conversation.finished'] });
      await startWorker(app);
      const conversationId = randomUUID();
      const agentSays = minimalEvent('MessageEvent', {
        id: randomUUID(),
        source: 'agent',
        llm_message: { role: 'assistant', content: [{ type: 'text', text: 'All tests pass; PR opened.' }] },
      });
      await deliver(conversationId, [agentSays]);
      await deliver(conversationId, [minimalEvent('ConversationStateUpdateEvent', { id: randomUUID(), key: 'execution_status', value: 'finished' })]);
      expect(await waitFor(() => receiver.requests.length >= 1, 15_000)).to.equal(true);
      await new Promise((resolve) => setTimeout(resolve, 700));
      expect(receiver.requests.map((r) => JSON.parse(r.body).type)).to.deep.equal(['conversation.finished']);
      const body = verify(secret, receiver.requests[0]!) as { data: Record<string, unknown> };
      expect(body.data).to.deep.include({ conversation_id: conversationId, execution_status: 'finished', event_count: 2, last_agent_message: 'All tests pass; PR opened.' });
    });

    it('retries a receiver failing twice: three attempts logged, one success, the same webhook-id', async () => {
      const { id, secret } = await createEndpoint({ url: receiver.url });
      receiver.answers = [500, 503];
      await startWorker(app);
      const test = await app.request.post(`/api/v1/webhook-endpoints/${id}/test`).set(auth()).expect(202);
      expect(test.body).to.include({ type: 'webhook.test', state: 'pending', attempts: 0 });
      expect(await waitFor(async () => (await messages(id))[0]!.state !== 'pending', 15_000)).to.equal(true);
      const [message] = await messages(id);
      expect(message).to.include({ state: 'succeeded', attempts: 3, last_status_code: 200, last_error: null });
      const log = await attempts(id, message!.id);
      expect(log.map((a) => [a.attempt, a.status_code])).to.deep.equal([[1, 500], [2, 503], [3, 200]]);
      expect(log[0]!.error).to.equal('The receiver answered 500');
      expect(new Set(receiver.requests.map((r) => r.headers['webhook-id']))).to.deep.equal(new Set([message!.id]));
      for (const request of receiver.requests) verify(secret, request);
    });

    it('logs a response excerpt holding a NUL character (which PostgreSQL text refuses) with U+FFFD in its place', async () => {
      const { id } = await createEndpoint({ url: receiver.url });
      receiver.answers = [500];
      receiver.answerBody = 'bad\u0000answer';
      await startWorker(app);
      await app.request.post(`/api/v1/webhook-endpoints/${id}/test`).set(auth()).expect(202);
      expect(await waitFor(async () => (await messages(id))[0]!.state === 'succeeded', 15_000)).to.equal(true);
      const log = (await app.request.get(`/api/v1/webhook-endpoints/${id}/messages/${(await messages(id))[0]!.id}/attempts`).set(auth()).expect(200))
        .body.items as { status_code: number; response_excerpt: string }[];
      expect(log.map((a) => [a.status_code, a.response_excerpt])).to.deep.equal([[500, 'bad\ufffdanswer'], [200, 'bad\ufffdanswer']]);
    });

    it('marks the message failed after the last attempt; retry queues one more', async () => {
      const { id } = await createEndpoint({ url: receiver.url });
      receiver.answers = [500, 500, 500, 500];
      await startWorker(app);
      await app.request.post(`/api/v1/webhook-endpoints/${id}/test`).set(auth()).expect(202);
      expect(await waitFor(async () => (await messages(id))[0]!.state === 'failed', 15_000)).to.equal(true);
      const [message] = await messages(id);
      expect(message).to.include({ attempts: 4, last_status_code: 500 });
      await app.request.post(`/api/v1/webhook-endpoints/${id}/messages/${message!.id}/retry`).set(auth()).expect(202);
      expect(await waitFor(async () => (await messages(id))[0]!.state === 'succeeded', 15_000)).to.equal(true);
      expect((await attempts(id, message!.id)).map((a) => a.attempt)).to.deep.equal([1, 2, 3, 4, 5]);
    });

    it('disables the endpoint on 410 Gone', async () => {
      const { id } = await createEndpoint({ url: receiver.url });
      receiver.answers = [410];
      await startWorker(app);
      await app.request.post(`/api/v1/webhook-endpoints/${id}/test`).set(auth()).expect(202);
      expect(await waitFor(async () => (await messages(id))[0]!.state === 'failed', 15_000)).to.equal(true);
      const endpoint = await app.request.get(`/api/v1/webhook-endpoints/${id}`).set(auth()).expect(200);
      expect(endpoint.body).to.include({ disabled: true, disabled_reason: 'The receiver answered 410 Gone' });
      expect(receiver.requests).to.have.length(1);
    });

    it('disables an endpoint that failed every attempt for longer than the configured time', async () => {
      const quick = await outboundApp({ disableAfterMs: 1 });
      const { id } = await createEndpoint({ url: receiver.url }, user, quick);
      receiver.answers = [500, 500, 500, 500];
      await startWorker(quick);
      await quick.request.post(`/api/v1/webhook-endpoints/${id}/test`).set(auth()).expect(202);
      expect(await waitFor(async () => (await app.request.get(`/api/v1/webhook-endpoints/${id}`).set(auth())).body.disabled === true, 15_000)).to.equal(true);
      expect((await app.request.get(`/api/v1/webhook-endpoints/${id}`).set(auth())).body.disabled_reason).to.equal('Every attempt failed for too long');
    });

    it('signs with both the new and the previous secret during the overlap after a rotation', async () => {
      const { id, secret: before } = await createEndpoint({ url: receiver.url });
      const rotated = await app.request.post(`/api/v1/webhook-endpoints/${id}/rotate-secret`).set(auth()).expect(200);
      const after = rotated.body.secret as string;
      rememberSecret(after);
      expect(after).to.match(/^whsec_/).and.not.equal(before);
      await startWorker(app);
      await app.request.post(`/api/v1/webhook-endpoints/${id}/test`).set(auth()).expect(202);
      expect(await waitFor(() => receiver.requests.length === 1, 15_000)).to.equal(true);
      const [request] = receiver.requests;
      expect((request!.headers['webhook-signature'] as string).split(' ')).to.have.length(2);
      verify(after, request!);
      verify(before, request!);
      expect(() => verify(`whsec_${Buffer.alloc(24, 7).toString('base64')}`, request!)).to.throw();
    });

    it('without the overlap (0 hours), signs with the new secret only', async () => {
      const noOverlap = await outboundApp({ rotationOverlapMs: 0 });
      const { id, secret: before } = await createEndpoint({ url: receiver.url }, user, noOverlap);
      const after = (await noOverlap.request.post(`/api/v1/webhook-endpoints/${id}/rotate-secret`).set(auth()).expect(200)).body.secret as string;
      rememberSecret(after);
      await startWorker(noOverlap);
      await noOverlap.request.post(`/api/v1/webhook-endpoints/${id}/test`).set(auth()).expect(202);
      expect(await waitFor(() => receiver.requests.length === 1, 15_000)).to.equal(true);
      verify(after, receiver.requests[0]!);
      expect(() => verify(before, receiver.requests[0]!)).to.throw();
    });

    it('two instances make each attempt once', async () => {
      const { id } = await createEndpoint({ url: receiver.url });
      const second = await outboundApp();
      await startWorker(app);
      await startWorker(second);
      for (let i = 0; i < 20; i++) await app.request.post(`/api/v1/webhook-endpoints/${id}/test`).set(auth()).expect(202);
      expect(await waitFor(async () => (await messages(id)).every((m) => m.state === 'succeeded'), 20_000)).to.equal(true);
      const ids = receiver.requests.map((r) => r.headers['webhook-id']);
      expect(ids).to.have.length(20);
      expect(new Set(ids).size).to.equal(20);
      const rows = await testDatabase().orm.em.getConnection().execute('select count(*)::integer as n from webhook_attempts');
      expect(rows[0]!.n).to.equal(20);
    });

    it('sends checkout.completed when a checkout completes (local checkout)', async () => {
      const { secret } = await createEndpoint({ url: receiver.url, event_types: ['checkout.completed'] });
      await startWorker(app);
      const created = await app.request.post('/api/billing/create-checkout-session').set(auth()).send({ amount: 25 }).expect(200);
      const sessionId = new URL(created.body.redirect_url).pathname.split('/').pop()!;
      await app.request.post(`/billing/checkout/${sessionId}/confirm`).type('form').send('').expect(303);
      expect(await waitFor(() => receiver.requests.length === 1, 15_000)).to.equal(true);
      const body = verify(secret, receiver.requests[0]!) as { type: string; data: Record<string, unknown> };
      expect(body.type).to.equal('checkout.completed');
      expect(body.data).to.deep.equal({ session_id: sessionId, amount_usd: 25 });
    });

    it('sends billing.balance_depleted once, when spend takes the balance below zero', async () => {
      const { id, secret } = await createEndpoint({ url: receiver.url, event_types: ['billing.balance_depleted'] });
      await startWorker(app);
      const created = await app.request.post('/api/billing/create-checkout-session').set(auth()).send({ amount: 1 }).expect(200);
      const sessionId = new URL(created.body.redirect_url).pathname.split('/').pop()!;
      await app.request.post(`/billing/checkout/${sessionId}/confirm`).type('form').send('').expect(303);
      const conversationId = randomUUID();
      const info = (seconds: number, cost: number) => ({
        id: conversationId,
        updated_at: new Date(Date.UTC(2026, 10, 23, 18, 0, seconds)).toISOString(),
        stats: { usage_to_metrics: { agent: { model_name: 'anthropic/claude-sonnet-4-5', accumulated_cost: cost } } },
      });
      const post = (body: object) => app.request.post('/api/v1/webhooks/conversations').set('X-Session-API-Key', user.sessionApiKey).send(body);
      await post(info(1, 0.5)).expect(201);
      await post(info(2, 1.25)).expect(200);
      await post(info(3, 2)).expect(200);
      expect(await waitFor(() => receiver.requests.length === 1, 15_000)).to.equal(true);
      const body = verify(secret, receiver.requests[0]!) as { type: string; data: Record<string, unknown> };
      expect(body.type).to.equal('billing.balance_depleted');
      expect(body.data).to.deep.equal({
        conversation_id: conversationId,
        balance_usd: -0.25,
        balance_micro_usd: -250_000,
        purchased_micro_usd: 1_000_000,
        spent_micro_usd: 1_250_000,
      });
      expect((await messages(id)).map((m) => m.type)).to.deep.equal(['billing.balance_depleted']);
    });

    it('does not store a message for a rolled-back batch', async () => {
      const { id } = await createEndpoint({ url: receiver.url });
      const other = await createUserFixture();
      const conversationId = randomUUID();
      await deliver(conversationId, [minimalEvent('MessageEvent', { id: randomUUID() })]);
      const before = (await messages(id)).length;
      // Another user's batch for the same conversation: 403, nothing stored, nothing announced.
      await postEvents(app, other.sessionApiKey, conversationId, [minimalEvent('MessageEvent', { id: randomUUID() })]).expect(403);
      expect((await messages(id)).length).to.equal(before);
      const [mark] = await testDatabase().orm.em.getConnection().execute('select webhook_events_from, event_count from conversations where id = ?', [conversationId]);
      expect(mark).to.deep.equal({ webhook_events_from: 1, event_count: 1 });
    });
  });

  describe('fan-out at delivery (one message row per cause)', () => {
    const sql = (text: string, params: unknown[] = []) => testDatabase().orm.em.getConnection().execute(text, params);

    it('one batch reaches each subscribed endpoint exactly once with the same webhook-id; later, other-conversation and other-type endpoints get nothing', async () => {
      const conversationId = randomUUID();
      const subscribed = [];
      for (let n = 1; n <= 3; n++) subscribed.push({ n, ...(await createEndpoint({ url: `${receiver.url}?n=${n}`, event_types: ['conversation.events'] })) });
      const otherConversation = await createEndpoint({ url: `${receiver.url}?n=other-conversation`, conversation_id: randomUUID() });
      const otherType = await createEndpoint({ url: `${receiver.url}?n=other-type`, event_types: ['conversation.finished'] });
      await deliver(conversationId, [minimalEvent('MessageEvent', { id: randomUUID() })]);
      // Stored with the batch: the conversation's mark of the events it owes; the worker makes the message.
      expect(await sql('select webhook_events_from from conversations where id = ?', [conversationId])).to.deep.equal([{ webhook_events_from: 1 }]);
      expect((await sql('select count(*)::integer as n from webhook_deliveries'))[0]!.n).to.equal(0);
      const late = await createEndpoint({ url: `${receiver.url}?n=late` });
      // Made later, stamped with the batch's time: an endpoint created after the batch still gets nothing.
      expect(await app.worker.makeOwedEventMessages()).to.equal(1);
      const stored = await sql(`select id, fanned_out from webhook_messages where type = 'conversation.events'`);
      expect(stored).to.have.length(1);
      expect(stored[0]!.fanned_out).to.equal(false);
      expect(await sql('select webhook_events_from from conversations where id = ?', [conversationId])).to.deep.equal([{ webhook_events_from: null }]);
      await startWorker(app);
      expect(await waitFor(() => receiver.ofType('conversation.events').length >= 3, 15_000)).to.equal(true);
      await new Promise((resolve) => setTimeout(resolve, 1_000)); // anything more would have arrived by now
      const events = receiver.requests.filter((r) => JSON.parse(r.body).type === 'conversation.events');
      expect(events.map((r) => r.url).sort()).to.deep.equal(['/hook?n=1', '/hook?n=2', '/hook?n=3']);
      for (const { n, id, secret } of subscribed) {
        const request = events.find((r) => r.url === `/hook?n=${n}`)!;
        expect(request.headers['webhook-id']).to.equal(stored[0]!.id);
        verify(secret, request);
        const log = await messages(id);
        expect(log.map((m) => [m.id, m.type, m.state])).to.deep.equal([[stored[0]!.id, 'conversation.events', 'succeeded']]);
        expect(await attempts(id, stored[0]!.id)).to.have.length(1);
      }
      expect(receiver.requests.filter((r) => /other|late/.test(r.url))).to.deep.equal([]);
      expect(await messages(otherConversation.id)).to.deep.equal([]);
      expect(await messages(otherType.id)).to.deep.equal([]);
      expect(await messages(late.id)).to.deep.equal([]);
      await app.request.get(`/api/v1/webhook-endpoints/${late.id}/messages/${stored[0]!.id}/attempts`).set(auth()).expect(404);
    });

    it('makes one conversation.events message of the transactions owed when the worker comes, in order', async () => {
      const { id } = await createEndpoint({ url: receiver.url, event_types: ['conversation.events'] });
      const conversationId = randomUUID();
      await deliver(conversationId, [minimalEvent('MessageEvent', { id: randomUUID() }), minimalEvent('MessageEvent', { id: randomUUID() })]);
      await deliver(conversationId, [minimalEvent('MessageEvent', { id: randomUUID() })]);
      // The mark stays where the first owed event is; the later batch does not move it.
      expect(await sql('select webhook_events_from from conversations where id = ?', [conversationId])).to.deep.equal([{ webhook_events_from: 1 }]);
      await app.worker.makeOwedEventMessages();
      await deliver(conversationId, [minimalEvent('MessageEvent', { id: randomUUID() }), minimalEvent('MessageEvent', { id: randomUUID() })]);
      await app.worker.makeOwedEventMessages();
      const made = await sql(
        `select data->>'from_seq' as from_seq, data->>'to_seq' as to_seq, created_at from webhook_messages where conversation_id = ? order by created_at`,
        [conversationId],
      );
      expect(made.map(({ from_seq, to_seq }) => ({ from_seq, to_seq }))).to.deep.equal([
        { from_seq: '1', to_seq: '3' },
        { from_seq: '4', to_seq: '5' },
      ]);
      // Stamped with its first transaction's time.
      const [first] = await sql('select received_at from conversation_events where conversation_id = ? and seq = 1', [conversationId]);
      expect(new Date(made[0]!.created_at).getTime()).to.equal(new Date(first!.received_at).getTime());
      await startWorker(app);
      expect(await waitFor(async () => (await messages(id)).filter((m) => m.state === 'succeeded').length === 2, 15_000)).to.equal(true);
      const ranges = receiver.ofType('conversation.events').map((m) => [m.data.from_seq, m.data.to_seq, (m.data.events as unknown[]).length]);
      expect(ranges.sort()).to.deep.equal([[1, 3, 3], [4, 5, 2]]);
    });

    it('keeps a message within 1,000 events and 256 KB of events, and never cuts a transaction to do so', async () => {
      await createEndpoint({ url: receiver.url, event_types: ['conversation.events'] });
      const conversationId = randomUUID();
      const big = () => {
        const event = minimalEvent('MessageEvent', { id: randomUUID() }) as { llm_message: { content: { text?: string }[] } };
        event.llm_message.content[0]!.text = 'x'.repeat(60 * 1024);
        return event as unknown as Record<string, unknown>;
      };
      const small = (n: number) => Array.from({ length: n }, () => minimalEvent('PauseEvent', { id: randomUUID() }));
      // 5 events of about 60 KB, in transactions of 2, 2 and 1: 4 fit in 256 KB, the fifth starts the next message.
      await deliver(conversationId, [big(), big()]);
      await deliver(conversationId, [big(), big()]);
      await deliver(conversationId, [big()]);
      // Then 1,200 events of about 150 bytes in transactions of 400: with 5, two fit in 1,000 events (5–805), not three.
      for (let i = 0; i < 3; i++) await deliver(conversationId, small(400));
      await app.worker.makeOwedEventMessages();
      const made = await sql(
        `select data->>'from_seq' as f, data->>'to_seq' as t from webhook_messages where conversation_id = ? order by (data->>'from_seq')::integer`,
        [conversationId],
      );
      expect(made.map((m) => `${m.f}-${m.t}`)).to.deep.equal(['1-4', '5-805', '806-1205']);
      const [size] = await sql('select sum(octet_length(payload::text) + 1)::integer as bytes from conversation_events where conversation_id = ? and seq <= 4', [
        conversationId,
      ]);
      expect(size!.bytes).to.be.within(200 * 1024, 256 * 1024);
      expect(await sql('select webhook_events_from from conversations where id = ?', [conversationId])).to.deep.equal([{ webhook_events_from: null }]);
    });

    it('makes a backlog in steps without cutting a transaction, unless one transaction alone is over the step', async () => {
      await createEndpoint({ url: receiver.url, event_types: ['conversation.events'] });
      const conversationId = randomUUID();
      const batch = (n: number) => Array.from({ length: n }, () => minimalEvent('MessageEvent', { id: randomUUID() }));
      await deliver(conversationId, batch(2));
      await deliver(conversationId, batch(1));
      await deliver(conversationId, batch(2));
      await deliver(conversationId, batch(5));
      const ranges = async () =>
        (await sql(`select data->>'from_seq' as f, data->>'to_seq' as t from webhook_messages where conversation_id = ? order by (data->>'from_seq')::integer`, [conversationId])).map(
          (m) => `${m.f}-${m.t}`,
        );
      // Events 1–4 read: the transaction of 4–5 may go on past 4, so it waits for the next step.
      await app.worker.makeOwedEventMessages(4);
      expect(await ranges()).to.deep.equal(['1-3']);
      await app.worker.makeOwedEventMessages(4);
      expect(await ranges()).to.deep.equal(['1-3', '4-5']);
      // 6–10 is one transaction, longer than the step: cut.
      await app.worker.makeOwedEventMessages(4);
      await app.worker.makeOwedEventMessages(4);
      expect(await ranges()).to.deep.equal(['1-3', '4-5', '6-9', '10-10']);
      expect(await sql('select webhook_events_from from conversations where id = ?', [conversationId])).to.deep.equal([{ webhook_events_from: null }]);
    });

    it('keeps a message already stored under the same id, and makes what follows it from its end (a mark that went back)', async () => {
      await createEndpoint({ url: receiver.url, event_types: ['conversation.events'] });
      const conversationId = randomUUID();
      await deliver(conversationId, [minimalEvent('MessageEvent', { id: randomUUID() })]);
      await app.worker.makeOwedEventMessages();
      const first = await sql('select id, created_at, data from webhook_messages where conversation_id = ?', [conversationId]);
      expect(first[0]!.id).to.match(/^msg_[0-9a-f]{32}$/);
      // As if the mark had not moved past the stored message (a version that stored first and moved it after).
      await sql('update conversations set webhook_events_from = 1 where id = ?', [conversationId]);
      await deliver(conversationId, [minimalEvent('MessageEvent', { id: randomUUID() })]);
      await deliver(conversationId, [minimalEvent('MessageEvent', { id: randomUUID() })]);
      // 1–3 has the stored message's id: it stands (1–1), and the mark moves to 2.
      await app.worker.makeOwedEventMessages();
      expect(await sql('select id, created_at, data from webhook_messages where conversation_id = ?', [conversationId])).to.deep.equal(first);
      expect(await sql('select webhook_events_from from conversations where id = ?', [conversationId])).to.deep.equal([{ webhook_events_from: 2 }]);
      await app.worker.makeOwedEventMessages();
      const all = await sql(`select data->>'from_seq' as f, data->>'to_seq' as t from webhook_messages where conversation_id = ? order by created_at`, [conversationId]);
      expect(all.map((m) => `${m.f}-${m.t}`)).to.deep.equal(['1-1', '2-3']);
    });

    it('makes no message of a conversation an ingest transaction holds, and makes it once the ingest commits', async () => {
      await createEndpoint({ url: receiver.url, event_types: ['conversation.events'] });
      const conversationId = randomUUID();
      await deliver(conversationId, [minimalEvent('MessageEvent', { id: randomUUID() })]);
      const knex = testDatabase().orm.em.getConnection().getKnex();
      const holder = await knex.transaction();
      try {
        await holder.raw('select 1 from conversations where id = ? for no key update', [conversationId]);
        expect(await app.worker.makeOwedEventMessages()).to.equal(0);
      } finally {
        await holder.rollback();
      }
      expect(await app.worker.makeOwedEventMessages()).to.equal(1);
      expect((await sql('select count(*)::integer as n from webhook_messages where conversation_id = ?', [conversationId]))[0]!.n).to.equal(1);
    });

    it('stores no message for a cause no enabled endpoint wants', async () => {
      await createEndpoint({ url: receiver.url, event_types: ['checkout.completed'] });
      const disabled = await createEndpoint({ url: receiver.url });
      await app.request.patch(`/api/v1/webhook-endpoints/${disabled.id}`).set(auth()).send({ disabled: true }).expect(200);
      const conversationId = randomUUID();
      await deliver(conversationId, [minimalEvent('MessageEvent', { id: randomUUID() })]);
      expect((await sql('select count(*)::integer as n from webhook_messages'))[0]!.n).to.equal(0);
      expect(await sql('select webhook_events_from from conversations where id = ?', [conversationId])).to.deep.equal([{ webhook_events_from: null }]);
      expect((await sql(`select count(*)::integer as n from pgboss.job where name = 'webhook-delivery'`))[0]!.n).to.equal(0);
    });

    it('webhook_enqueue (SQL, for other features) stores one message per cause and no job: the outbox poll delivers them', async () => {
      const { id } = await createEndpoint({ url: receiver.url });
      const knex = testDatabase().orm.em.getConnection().getKnex();
      const counts = await knex.transaction(async (trx) => {
        const a = await trx.raw(`select webhook_enqueue(?, null, 'webhook.test', '{"n": 1}'::jsonb) as n`, [user.userId]);
        const b = await trx.raw(`select webhook_enqueue(?, null, 'webhook.test', '{"n": 2}'::jsonb) as n`, [user.userId]);
        return [a.rows[0].n, b.rows[0].n];
      });
      expect(counts).to.deep.equal([1, 1]);
      expect((await sql(`select count(*)::integer as n from webhook_messages where not fanned_out`))[0]!.n).to.equal(2);
      expect((await sql(`select count(*)::integer as n from pgboss.job where name = 'webhook-delivery'`))[0]!.n).to.equal(0);
      await startWorker(app);
      expect(await waitFor(async () => (await messages(id)).filter((m) => m.state === 'succeeded').length === 2, 15_000)).to.equal(true);
      expect(receiver.requests.map((r) => JSON.parse(r.body).data.n).sort()).to.deep.equal([1, 2]);
    });
  });

  describe('upgrading (jobs queued by earlier versions)', () => {
    const sql = (text: string, params: unknown[] = []) => testDatabase().orm.em.getConnection().execute(text, params);

    it('delivers the jobs an earlier version queued ({message_ids}, {fanout}) once the migration has converted them', async () => {
      const { id } = await createEndpoint({ url: receiver.url });
      const sent = (await app.request.post(`/api/v1/webhook-endpoints/${id}/test`).set(auth()).expect(202)).body as { id: string };
      // As a version before the outbox queued them: the first attempts of a cause's messages, and a fan-out.
      await sql(`update pgboss.job set data = jsonb_build_object('message_ids', jsonb_build_array(?::text), 'attempt', 1) where name = 'webhook-delivery'`, [
        sent.id,
      ]);
      await sql(`insert into pgboss.job (name, data) values ('webhook-delivery', '{"fanout": "pending"}')`);
      // The upgrade: the migration runs as on a database an earlier version had migrated.
      await sql('delete from mikro_orm_migrations where name = ?', ['Migration20261127020000_retire_legacy_delivery_jobs']);
      await migrate(testDatabase().orm);
      expect(await sql(`select data, state from pgboss.job where name = 'webhook-delivery'`)).to.deep.equal([
        { data: { message_id: sent.id, attempt: 1 }, state: 'created' },
      ]);
      await startWorker(app);
      expect(await waitFor(async () => (await messages(id))[0]!.state === 'succeeded', 15_000)).to.equal(true);
      expect(receiver.ofType('webhook.test')).to.have.length(1);
    });
  });

  describe('refused targets (OUTBOUND_WEBHOOK_ALLOW_PRIVATE=false)', () => {
    for (const host of ['127.0.0.1', '10.0.0.1', '169.254.169.254', '[::1]', 'localhost']) {
      it(`refuses ${host} before connecting`, async () => {
        const strict = (publicOnly ??= await outboundApp({ allowPrivate: false, retryScheduleMs: [0] }));
        const port = host === '10.0.0.1' || host === '169.254.169.254' ? 80 : receiver.port;
        const { id } = await createEndpoint({ url: `http://${host}:${port}/hook` }, user, strict);
        await startWorker(strict);
        await strict.request.post(`/api/v1/webhook-endpoints/${id}/test`).set(auth()).expect(202);
        expect(await waitFor(async () => (await messages(id))[0]!.state === 'failed', 15_000)).to.equal(true);
        const [message] = await messages(id);
        expect(message!.last_status_code).to.equal(null);
        expect(message!.last_error).to.match(/^Refused: .*(private, loopback or link-local)/);
        expect(receiver.requests).to.have.length(0);
      });
    }

    it('classifies addresses after resolution, IPv4 inside IPv6 included', () => {
      for (const address of ['127.0.0.1', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '0.0.0.0', '::1', '::', 'fd00::1', 'fe80::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1', '100.64.0.1']) {
        expect(isForbiddenAddress(address), address).to.equal(true);
      }
      for (const address of ['93.184.216.34', '8.8.8.8', '2606:4700::1111']) expect(isForbiddenAddress(address), address).to.equal(false);
    });
  });

  describe('durability', () => {
    /** A server process on the test database, delivering to the loopback receiver. */
    const serverEnv = (extra: Record<string, string> = {}) => ({
      ...process.env,
      DATABASE_URL: testDatabase().url,
      // The key file the test app encrypted the endpoint's secret with.
      DATA_DIR: testConfig().dataDir,
      CREDENTIAL_CACHE_TTL_MS: '0',
      OUTBOUND_WEBHOOK_ALLOW_HTTP: 'true',
      OUTBOUND_WEBHOOK_ALLOW_PRIVATE: 'true',
      ...extra,
    });
    const postOneEvent = (baseUrl: string, conversationId: string) =>
      fetch(`${baseUrl}${webhookPath(conversationId)}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-session-api-key': user.sessionApiKey },
        body: JSON.stringify([minimalEvent('MessageEvent', { id: randomUUID() })]),
      });

    it('SIGKILL after the commit, before any message was made: delivered after a restart, none lost', async () => {
      const env = serverEnv();
      const { id } = await createEndpoint({ url: receiver.url, event_types: ['conversation.events'] });
      // Its worker looks for owed messages at start only, then not for a minute: the kill comes first.
      const first = await startServerProcess({ ...env, OUTBOUND_WEBHOOK_DISPATCH_MS: '60000' });
      const conversationId = randomUUID();
      expect((await postOneEvent(first.baseUrl, conversationId)).status).to.equal(200);
      first.child.kill('SIGKILL');
      await first.exited;
      const sql = testDatabase().orm.em.getConnection();
      expect(await sql.execute('select webhook_events_from from conversations where id = ?', [conversationId])).to.deep.equal([{ webhook_events_from: 1 }]);
      expect(await sql.execute('select id from webhook_messages where conversation_id = ?', [conversationId])).to.deep.equal([]);
      await startServerProcess(env);
      expect(await waitFor(async () => (await messages(id)).some((m) => m.state === 'succeeded'), 30_000)).to.equal(true);
      expect(receiver.ofType('conversation.events').map((m) => m.data.conversation_id)).to.deep.equal([conversationId]);
    });

    it('SIGKILL during a delivery: the attempt is made again after a restart, none lost', async () => {
      const env = serverEnv({
        LOG_LEVEL: 'info',
        OUTBOUND_WEBHOOK_TIMEOUT_MS: '1000',
        OUTBOUND_WEBHOOK_RETRY_SCHEDULE: '0,300,300',
        OUTBOUND_WEBHOOK_POLL_MS: '500',
      });
      const { id } = await createEndpoint({ url: receiver.url });
      receiver.hang = true;
      const first = await startServerProcess(env);
      const conversationId = randomUUID();
      expect((await postOneEvent(first.baseUrl, conversationId)).status).to.equal(200);
      // The first attempt reached the receiver, which holds it: kill the server mid-delivery.
      expect(await waitFor(() => receiver.requests.length >= 1, 15_000)).to.equal(true);
      first.child.kill('SIGKILL');
      await first.exited;
      const heldIds = new Set(receiver.requests.map((r) => r.headers['webhook-id']));
      receiver.hang = false;
      await startServerProcess(env);
      const done = await waitFor(async () => (await messages(id)).length >= 2 && (await messages(id)).every((m) => m.state === 'succeeded'), 30_000);
      const jobs = await testDatabase().orm.em.getConnection().execute(`select state, data, retry_count, expire_seconds, started_on, start_after from pgboss.job`);
      expect(done, JSON.stringify({ messages: await messages(id), jobs })).to.equal(true);
      const delivered = new Set(receiver.requests.map((r) => r.headers['webhook-id']));
      for (const held of heldIds) expect(delivered.has(held)).to.equal(true);
      expect(receiver.ofType('conversation.events')).to.have.length.greaterThan(0);
    });
  });
});
