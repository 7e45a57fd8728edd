import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { DeliveryWorker } from '../../src/outbound/delivery-worker.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { eventsMade, outboundApp, Receiver, verifyDelivery, type OutboundApp } from '../helpers/outbound.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';
import { waitFor } from '../helpers/server-process.ts';
import { postEvents } from '../helpers/webhook.ts';

interface Message {
  id: string;
  type: string;
  state: string;
  attempts: number;
  created_at: string;
}

interface RetryTask {
  id: string;
  filter: { status: string; event_type: string | null; conversation_id: string | null; since: string; until: string };
  state: string;
  total: number;
  sent: number;
  succeeded: number;
  last_error: string | null;
}

describe('POST /api/v1/webhook-endpoints/{endpoint_id}/message-retries', function () {
  this.timeout(60_000);

  // One attempt per message: a receiver's outage leaves them failed at once.
  let app: OutboundApp;
  let user: UserFixture;
  let receiver: Receiver;
  let worker: DeliveryWorker | undefined;

  before(async () => {
    app = await outboundApp({ retryScheduleMs: [0] });
  });

  beforeEach(async () => {
    user = await createUserFixture();
    receiver = await new Receiver().start();
  });

  afterEach(async () => {
    await worker?.stop(1_000);
    worker = undefined;
    await receiver.stop();
  });

  const auth = (u: UserFixture = user) => ({ 'X-Access-Token': u.accessToken });
  const oneEvent = () => [minimalEvent('MessageEvent', { id: randomUUID() })];
  const retries = (endpointId: string) => `/api/v1/webhook-endpoints/${endpointId}/message-retries`;

  async function createEndpoint(body: Record<string, unknown>, u: UserFixture = user) {
    const response = await app.request.post('/api/v1/webhook-endpoints').set(auth(u)).send(body).expect(201);
    rememberSecret(response.body.secret);
    return response.body as { id: string; secret: string };
  }

  async function messages(endpointId: string, query: Record<string, string> = {}): Promise<Message[]> {
    return (await app.request.get(`/api/v1/webhook-endpoints/${endpointId}/messages`).query(query).set(auth()).expect(200)).body.items;
  }

  async function task(endpointId: string, taskId: string): Promise<RetryTask> {
    return (await app.request.get(`${retries(endpointId)}/${taskId}`).set(auth()).expect(200)).body;
  }

  /** Two conversations' messages while the receiver is down (503): each conversation's `created` and two `events`, all failed. */
  async function outage(endpointId: string): Promise<{ a: string; b: string }> {
    const a = randomUUID();
    const b = randomUUID();
    receiver.answers = Array.from({ length: 6 }, () => 503);
    for (const conversationId of [a, b, a, b]) {
      await postEvents(app, user.sessionApiKey, conversationId, oneEvent()).expect(200);
      expect(await eventsMade(conversationId)).to.equal(true);
    }
    expect(await waitFor(async () => (await messages(endpointId, { status: 'failed' })).length === 6, 15_000)).to.equal(true);
    return { a, b };
  }

  it('re-delivers exactly the filtered failed messages once each, in order, with their webhook-id, verified by standardwebhooks', async () => {
    const { id, secret } = await createEndpoint({ url: receiver.url, event_types: ['conversation.created', 'conversation.events'] });
    worker = app.worker;
    await worker.start();
    const { a } = await outage(id);
    const filter = { status: 'failed', event_type: 'conversation.events', conversation_id: a };
    const listed = await messages(id, filter);
    expect(listed.map((m) => m.type)).to.deep.equal(['conversation.events', 'conversation.events']);
    const expected = listed.reverse();
    const before = receiver.requests.length;

    const started = await app.request.post(retries(id)).set(auth()).send(filter).expect(202);
    expect(started.body).to.include({ endpoint_id: id, state: 'running', total: 2, sent: 0, succeeded: 0 });
    expect(started.body.filter).to.include({ status: 'failed', event_type: 'conversation.events', conversation_id: a });
    expect(await waitFor(async () => (await task(id, started.body.id)).state !== 'running', 15_000)).to.equal(true);
    expect(await task(id, started.body.id)).to.include({ state: 'completed', total: 2, sent: 2, succeeded: 2, last_error: null });

    const resent = receiver.requests.slice(before);
    expect(resent.map((r) => r.headers['webhook-id'])).to.deep.equal(expected.map((m) => m.id));
    const bodies = resent.map((r) => verifyDelivery(secret, r) as { type: string; data: { conversation_id: string; from_seq: number } });
    expect(bodies.map((body) => [body.type, body.data.conversation_id, body.data.from_seq])).to.deep.equal([
      ['conversation.events', a, 1],
      ['conversation.events', a, 2],
    ]);
    const after = await messages(id);
    expect(after.filter((m) => m.state === 'succeeded').map((m) => m.id).sort()).to.deep.equal(expected.map((m) => m.id).sort());
    expect(after.filter((m) => m.state === 'failed')).to.have.length(4);
    expect(after.filter((m) => expected.some((e) => e.id === m.id)).map((m) => m.attempts)).to.deep.equal([2, 2]);
  });

  it('starts one task for one Idempotency-Key, and answers 409 while a task of the endpoint runs', async () => {
    const { id } = await createEndpoint({ url: receiver.url, event_types: ['conversation.created', 'conversation.events'] });
    worker = app.worker;
    await worker.start();
    await outage(id);
    await worker.stop(1_000);
    worker = undefined;
    const key = randomUUID();
    const first = await app.request.post(retries(id)).set(auth()).set('Idempotency-Key', key).send({ event_type: 'conversation.created' }).expect(202);
    expect(first.body).to.include({ state: 'running', total: 2 });
    expect(first.body.filter).to.include({ status: 'failed', event_type: 'conversation.created', conversation_id: null });
    const again = await app.request.post(retries(id)).set(auth()).set('Idempotency-Key', key).send({ event_type: 'conversation.created' }).expect(202);
    expect(again.headers['idempotent-replayed']).to.equal('true');
    expect(again.body.id).to.equal(first.body.id);
    const conflict = await app.request.post(retries(id)).set(auth()).send({}).expect(409);
    expect(conflict.body.detail).to.equal('A bulk retry of this endpoint is running');
    const recover = await app.request.post(`/api/v1/webhook-endpoints/${id}/recover`).set(auth()).send({ since: new Date(Date.now() - 60_000).toISOString() }).expect(409);
    expect(recover.body.detail).to.equal('A bulk retry of this endpoint is running');
    // A retry task is not a recovery task, and the other way round.
    await app.request.get(`/api/v1/webhook-endpoints/${id}/recover/${first.body.id}`).set(auth()).expect(404);
  });

  it('returns 404 for another user\'s endpoint or task, as the other endpoint operations do', async () => {
    const { id } = await createEndpoint({ url: receiver.url });
    const started = await app.request.post(retries(id)).set(auth()).send({}).expect(202);
    expect(started.body).to.include({ state: 'completed', total: 0 });
    const other = await createUserFixture();
    const foreign = await app.request.post(retries(id)).set(auth(other)).send({}).expect(404);
    const missing = await app.request.get(`/api/v1/webhook-endpoints/${id}`).set(auth(other)).expect(404);
    expect(foreign.body.detail).to.equal(missing.body.detail);
    await app.request.get(`${retries(id)}/${started.body.id}`).set(auth(other)).expect(404);
    await app.request.get(`${retries(id)}/${randomUUID()}`).set(auth()).expect(404);
  });

  it('returns 422 naming the field of a bad filter', async () => {
    const { id } = await createEndpoint({ url: receiver.url });
    const cases: [Record<string, unknown>, string[]][] = [
      [{ status: 'pending' }, ['body', 'status']],
      [{ event_type: 'conversation.nope' }, ['body', 'event_type']],
      [{ conversation_id: 'not-a-uuid' }, ['body', 'conversation_id']],
      [{ since: 'yesterday' }, ['body', 'since']],
      [{ since: new Date(Date.now() - 15 * 86_400_000).toISOString() }, ['body', 'since']],
      [{ since: new Date(Date.now() - 60_000).toISOString(), until: new Date(Date.now() - 120_000).toISOString() }, ['body', 'until']],
      [{ state: 'failed' }, ['body', 'state']],
    ];
    for (const [body, loc] of cases) {
      const response = await app.request.post(retries(id)).set(auth()).send(body).expect(422);
      expect(response.body.detail[0].loc, JSON.stringify(body)).to.deep.equal(loc);
    }
    const listed = await app.request.get(`/api/v1/webhook-endpoints/${id}/messages`).query({ status: 'lost' }).set(auth()).expect(422);
    expect(listed.body.detail[0].loc).to.deep.equal(['query', 'status']);
    const reversed = await app.request
      .get(`/api/v1/webhook-endpoints/${id}/messages`)
      .query({ since: new Date().toISOString(), until: new Date(Date.now() - 60_000).toISOString() })
      .set(auth())
      .expect(422);
    expect(reversed.body.detail[0].loc).to.deep.equal(['query', 'until']);
  });
});
