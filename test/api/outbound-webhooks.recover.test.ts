import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { DeliveryWorker } from '../../src/outbound/delivery-worker.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
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

describe('POST /api/v1/webhook-endpoints/{endpoint_id}/recover', function () {
  this.timeout(60_000);

  // One attempt per message: a receiver's outage leaves them failed at once.
  let app: OutboundApp;
  let user: UserFixture;
  let receiver: Receiver;
  const started: DeliveryWorker[] = [];

  before(async () => {
    app = await outboundApp({ retryScheduleMs: [0] });
  });

  beforeEach(async () => {
    user = await createUserFixture();
    receiver = await new Receiver().start();
  });

  afterEach(async () => {
    await Promise.all(started.splice(0).map((worker) => worker.stop(1_000)));
    await receiver.stop();
  });

  const auth = (u: UserFixture = user) => ({ 'X-Access-Token': u.accessToken });

  async function startWorker(): Promise<void> {
    await app.worker.start();
    started.push(app.worker);
  }

  async function createEndpoint(body: Record<string, unknown>, u: UserFixture = user) {
    const response = await app.request.post('/api/v1/webhook-endpoints').set(auth(u)).send(body).expect(201);
    rememberSecret(response.body.secret);
    return response.body as { id: string; secret: string };
  }

  async function messages(endpointId: string): Promise<Message[]> {
    return (await app.request.get(`/api/v1/webhook-endpoints/${endpointId}/messages`).set(auth()).expect(200)).body.items;
  }

  const oneEvent = () => [minimalEvent('MessageEvent', { id: randomUUID() })];
  const aMinuteAgo = () => new Date(Date.now() - 60_000).toISOString();

  async function recoverTask(endpointId: string, taskId: string) {
    return (await app.request.get(`/api/v1/webhook-endpoints/${endpointId}/recover/${taskId}`).set(auth()).expect(200)).body as {
      state: string;
      total: number;
      sent: number;
      succeeded: number;
      last_error: string | null;
    };
  }

  /** Posts `count` batches of one event while the receiver is down (503), until each message failed. */
  async function outage(endpointId: string, conversationId: string, count: number, before: number): Promise<Message[]> {
    receiver.answers = Array.from({ length: count }, () => 503);
    for (let i = 0; i < count; i++) {
      await postEvents(app, user.sessionApiKey, conversationId, oneEvent()).expect(200);
      expect(await eventsMade(conversationId)).to.equal(true);
    }
    expect(await waitFor(async () => (await messages(endpointId)).filter((m) => m.state === 'failed').length === count, 15_000)).to.equal(true);
    const all = await messages(endpointId);
    expect(all).to.have.length(before + count);
    return all.filter((m) => m.state === 'failed').reverse();
  }

  it('after an outage re-sends each failed message once, in order, with its webhook-id, verified by standardwebhooks', async () => {
    const { id, secret } = await createEndpoint({ url: receiver.url, event_types: ['conversation.events'] });
    await startWorker();
    const conversationId = randomUUID();
    await postEvents(app, user.sessionApiKey, conversationId, oneEvent()).expect(200);
    expect(await waitFor(async () => (await messages(id))[0]?.state === 'succeeded', 15_000)).to.equal(true);
    const failed = await outage(id, conversationId, 3, 1);
    const before = receiver.requests.length;

    const started = await app.request.post(`/api/v1/webhook-endpoints/${id}/recover`).set(auth()).send({ since: aMinuteAgo() }).expect(202);
    expect(started.body).to.include({ endpoint_id: id, state: 'running', total: 3, sent: 0, succeeded: 0 });
    expect(await waitFor(async () => (await recoverTask(id, started.body.id)).state !== 'running', 15_000)).to.equal(true);
    expect(await recoverTask(id, started.body.id)).to.include({ state: 'completed', total: 3, sent: 3, succeeded: 3, last_error: null });

    const resent = receiver.requests.slice(before);
    expect(resent.map((r) => r.headers['webhook-id'])).to.deep.equal(failed.map((m) => m.id));
    expect(resent.map((r) => (verifyDelivery(secret, r) as { data: { from_seq: number } }).data.from_seq)).to.deep.equal([2, 3, 4]);
    const after = await messages(id);
    expect(after.map((m) => [m.state, m.attempts])).to.deep.equal([['succeeded', 2], ['succeeded', 2], ['succeeded', 2], ['succeeded', 1]]);
    const log = (await app.request.get(`/api/v1/webhook-endpoints/${id}/messages/${failed[0]!.id}/attempts`).set(auth()).expect(200)).body.items;
    expect(log.map((a: { attempt: number; status_code: number }) => [a.attempt, a.status_code])).to.deep.equal([[1, 503], [2, 200]]);
  });

  it('stops at the first attempt that fails (no later message overtakes it); recovering again resumes there', async () => {
    const { id } = await createEndpoint({ url: receiver.url, event_types: ['conversation.events'] });
    await startWorker();
    const conversationId = randomUUID();
    const failed = await outage(id, conversationId, 3, 0);
    const before = receiver.requests.length;
    receiver.answers = [200, 500];
    const first = await app.request.post(`/api/v1/webhook-endpoints/${id}/recover`).set(auth()).send({ since: aMinuteAgo() }).expect(202);
    expect(await waitFor(async () => (await recoverTask(id, first.body.id)).state !== 'running', 15_000)).to.equal(true);
    const stopped = await recoverTask(id, first.body.id);
    expect(stopped).to.include({ state: 'failed', total: 3, sent: 2, succeeded: 1 });
    expect(stopped.last_error).to.equal(`${failed[1]!.id}: The receiver answered 500`);
    expect(receiver.requests.slice(before).map((r) => r.headers['webhook-id'])).to.deep.equal([failed[0]!.id, failed[1]!.id]);

    const again = await app.request.post(`/api/v1/webhook-endpoints/${id}/recover`).set(auth()).send({ since: aMinuteAgo() }).expect(202);
    expect(again.body.total).to.equal(2);
    expect(await waitFor(async () => (await recoverTask(id, again.body.id)).state !== 'running', 15_000)).to.equal(true);
    expect(await recoverTask(id, again.body.id)).to.include({ state: 'completed', sent: 2, succeeded: 2 });
    expect(receiver.requests.slice(before).map((r) => r.headers['webhook-id'])).to.deep.equal([failed[0]!.id, failed[1]!.id, failed[1]!.id, failed[2]!.id]);
    expect((await messages(id)).every((m) => m.state === 'succeeded')).to.equal(true);
  });

  it('leaves messages outside the window alone', async () => {
    const { id } = await createEndpoint({ url: receiver.url, event_types: ['conversation.events'] });
    await startWorker();
    const failed = await outage(id, randomUUID(), 2, 0);
    const before = receiver.requests.length;
    const until = failed[1]!.created_at;
    const task = await app.request.post(`/api/v1/webhook-endpoints/${id}/recover`).set(auth()).send({ since: aMinuteAgo(), until }).expect(202);
    expect(task.body.total).to.equal(1);
    expect(await waitFor(async () => (await recoverTask(id, task.body.id)).state === 'completed', 15_000)).to.equal(true);
    expect(receiver.requests.slice(before).map((r) => r.headers['webhook-id'])).to.deep.equal([failed[0]!.id]);
  });

  it('returns 409 while a recovery of the endpoint runs, and for a disabled endpoint', async () => {
    const { id } = await createEndpoint({ url: receiver.url });
    await app.request.post(`/api/v1/webhook-endpoints/${id}/test`).set(auth()).expect(202);
    await app.request.post(`/api/v1/webhook-endpoints/${id}/test`).set(auth()).expect(202);
    // No worker runs: the test messages stay pending, so nothing failed yet and the task completes at once.
    const empty = await app.request.post(`/api/v1/webhook-endpoints/${id}/recover`).set(auth()).send({ since: aMinuteAgo() }).expect(202);
    expect(empty.body).to.include({ state: 'completed', total: 0, sent: 0 });
    expect(empty.body.finished_at).to.be.a('string');
    await failAll(id);
    const running = await app.request.post(`/api/v1/webhook-endpoints/${id}/recover`).set(auth()).send({ since: aMinuteAgo() }).expect(202);
    expect(running.body).to.include({ state: 'running', total: 2 });
    const conflict = await app.request.post(`/api/v1/webhook-endpoints/${id}/recover`).set(auth()).send({ since: aMinuteAgo() }).expect(409);
    expect(conflict.body.detail).to.equal('A recovery of this endpoint is running');
    await app.request.patch(`/api/v1/webhook-endpoints/${id}`).set(auth()).send({ disabled: true }).expect(200);
    const disabled = await app.request.post(`/api/v1/webhook-endpoints/${id}/recover`).set(auth()).send({ since: aMinuteAgo() }).expect(409);
    expect(disabled.body.detail).to.equal('The endpoint is disabled; enable it before recovering its messages');
  });

  it('returns 422 for a window older than 14 days or ending before it starts, 404 for another user', async () => {
    const { id } = await createEndpoint({ url: receiver.url });
    const old = await app.request
      .post(`/api/v1/webhook-endpoints/${id}/recover`)
      .set(auth())
      .send({ since: new Date(Date.now() - 15 * 86_400_000).toISOString() })
      .expect(422);
    expect(old.body.detail[0]).to.include({ msg: 'Cannot recover messages more than 14 days old' });
    expect(old.body.detail[0].loc).to.deep.equal(['body', 'since']);
    const reversed = await app.request
      .post(`/api/v1/webhook-endpoints/${id}/recover`)
      .set(auth())
      .send({ since: aMinuteAgo(), until: new Date(Date.now() - 120_000).toISOString() })
      .expect(422);
    expect(reversed.body.detail[0].loc).to.deep.equal(['body', 'until']);
    await app.request.post(`/api/v1/webhook-endpoints/${id}/recover`).set(auth()).send({ since: 'yesterday' }).expect(422);
    const task = await app.request.post(`/api/v1/webhook-endpoints/${id}/recover`).set(auth()).send({ since: aMinuteAgo() }).expect(202);
    const other = await createUserFixture();
    await app.request.post(`/api/v1/webhook-endpoints/${id}/recover`).set(auth(other)).send({ since: aMinuteAgo() }).expect(404);
    await app.request.get(`/api/v1/webhook-endpoints/${id}/recover/${task.body.id}`).set(auth(other)).expect(404);
    await app.request.get(`/api/v1/webhook-endpoints/${id}/recover/${randomUUID()}`).set(auth()).expect(404);
  });

  /** Marks the endpoint's deliveries failed, as an exhausted schedule would. */
  async function failAll(endpointId: string): Promise<void> {
    await testDatabase().orm.em.getConnection().execute(`update webhook_deliveries set state = 'failed', attempts = 1 where endpoint_id = ?`, [endpointId]);
  }
});
