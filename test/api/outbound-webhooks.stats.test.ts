import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import type { DeliveryWorker } from '../../src/outbound/delivery-worker.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { outboundApp, Receiver, type OutboundApp } from '../helpers/outbound.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';
import { waitFor } from '../helpers/server-process.ts';

interface Attempt {
  started_at: string;
  duration_ms: number;
  status_code: number | null;
  error: string | null;
}

/** PostgreSQL's `percentile_cont`: linear interpolation between the closest ranks. */
function percentile(values: number[], p: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const position = p * (sorted.length - 1);
  const low = Math.floor(position);
  const high = Math.ceil(position);
  return sorted[low]! + (sorted[high]! - sorted[low]!) * (position - low);
}

describe('GET /api/v1/webhook-endpoints/{endpoint_id}/stats', function () {
  this.timeout(60_000);

  let app: OutboundApp;
  let user: UserFixture;
  let receiver: Receiver;
  const started: DeliveryWorker[] = [];

  before(async () => {
    app = await outboundApp({ retryScheduleMs: [0, 100, 100] });
  });

  beforeEach(async () => {
    user = await createUserFixture();
    receiver = await new Receiver().start();
    await app.worker.start();
    started.push(app.worker);
  });

  afterEach(async () => {
    await Promise.all(started.splice(0).map((worker) => worker.stop(1_000)));
    await receiver.stop();
  });

  const auth = () => ({ 'X-Access-Token': user.accessToken });

  async function createEndpoint(url: string) {
    const response = await app.request.post('/api/v1/webhook-endpoints').set(auth()).send({ url, event_types: ['webhook.test'] }).expect(201);
    rememberSecret(response.body.secret);
    return response.body.id as string;
  }

  /** Sends a test message and waits until it is no longer pending. */
  async function sendTest(id: string) {
    const sent = await app.request.post(`/api/v1/webhook-endpoints/${id}/test`).set(auth()).expect(202);
    const done = async () => {
      const items = (await app.request.get(`/api/v1/webhook-endpoints/${id}/messages`).set(auth()).expect(200)).body.items as { id: string; state: string }[];
      return items.find((m) => m.id === sent.body.id)!.state !== 'pending';
    };
    expect(await waitFor(done, 15_000)).to.equal(true);
  }

  /** Every attempt of the endpoint, read from its message log. */
  async function attemptLog(id: string): Promise<Attempt[]> {
    const messages = (await app.request.get(`/api/v1/webhook-endpoints/${id}/messages`).set(auth()).expect(200)).body.items as { id: string }[];
    const attempts: Attempt[] = [];
    for (const message of messages) {
      attempts.push(...(await app.request.get(`/api/v1/webhook-endpoints/${id}/messages/${message.id}/attempts`).set(auth()).expect(200)).body.items);
    }
    return attempts;
  }

  const stats = async (id: string, query = '') => (await app.request.get(`/api/v1/webhook-endpoints/${id}/stats${query}`).set(auth()).expect(200)).body;

  it('counts what the message log shows: attempts, successes, failures by status class, p50/p99, last success, state', async () => {
    const id = await createEndpoint(receiver.url);
    receiver.answers = [500, 404, 200, 302, 503, 429];
    await sendTest(id);
    await sendTest(id);
    const log = await attemptLog(id);
    expect(log).to.have.length(6);
    const failed = (low: number) => log.filter((a) => a.error !== null && a.status_code !== null && a.status_code >= low && a.status_code < low + 100).length;
    const body = await stats(id, '?window=1h');
    expect(body).to.deep.include({
      window: '1h',
      attempts: log.length,
      succeeded: log.filter((a) => a.error === null).length,
      failed: { '3xx': failed(300), '4xx': failed(400), '5xx': failed(500), other: 0, no_response: 0 },
      latency_ms: { p50: percentile(log.map((a) => a.duration_ms), 0.5), p99: percentile(log.map((a) => a.duration_ms), 0.99) },
      last_success_at: log.filter((a) => a.error === null).map((a) => a.started_at).sort().at(-1),
      state: 'failing',
    });
    expect(body.failed).to.deep.equal({ '3xx': 1, '4xx': 2, '5xx': 2, other: 0, no_response: 0 });
    expect(body.failing_since).to.equal(log.find((a) => a.status_code === 302)!.started_at);
    receiver.answers = [];
    await sendTest(id);
    expect(await stats(id)).to.deep.include({ window: '24h', attempts: 7, succeeded: 2, state: 'healthy', failing_since: null });
  });

  it('no answer at all (connection refused): no_response, no last success; disabled is the state once disabled; nothing in an empty window', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const id = await createEndpoint(`http://127.0.0.1:${port}/gone`);
    const empty = await stats(id);
    expect(empty).to.deep.include({ attempts: 0, succeeded: 0, latency_ms: { p50: null, p99: null }, last_success_at: null, state: 'healthy' });
    await sendTest(id);
    const body = await stats(id, '?window=7d');
    expect(body).to.deep.include({ attempts: 3, succeeded: 0, last_success_at: null, state: 'failing' });
    expect(body.failed).to.deep.equal({ '3xx': 0, '4xx': 0, '5xx': 0, other: 0, no_response: 3 });
    await app.request.patch(`/api/v1/webhook-endpoints/${id}`).set(auth()).send({ disabled: true }).expect(200);
    expect((await stats(id)).state).to.equal('disabled');
  });

  it('returns 422 for an unknown window and 404 for another user\'s endpoint', async () => {
    const id = await createEndpoint(receiver.url);
    await app.request.get(`/api/v1/webhook-endpoints/${id}/stats?window=2d`).set(auth()).expect(422);
    const other = await createUserFixture();
    await app.request.get(`/api/v1/webhook-endpoints/${id}/stats`).set('X-Access-Token', other.accessToken).expect(404);
  });
});
