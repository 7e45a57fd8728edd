import { expect } from 'chai';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { DeliveryWorker } from '../../src/outbound/delivery-worker.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { outboundApp, Receiver, verifyDelivery, type OutboundApp } from '../helpers/outbound.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';
import { waitFor } from '../helpers/server-process.ts';

const OPERATIONAL = ['endpoint.disabled', 'endpoint.recovered', 'message.attempt.exhausted', 'message.attempt.failing'];

describe('outbound webhooks: operational messages to the owner\'s other endpoints', function () {
  this.timeout(60_000);

  let app: OutboundApp;
  let user: UserFixture;
  let sick: Receiver;
  let watcher: Receiver;
  let validators: Map<string, (body: unknown) => boolean>;
  const started: DeliveryWorker[] = [];

  before(async () => {
    app = await outboundApp({ retryScheduleMs: [0, 300] });
    const first = await createUserFixture();
    const catalog = (await app.request.get('/api/v1/webhook-event-types').set('X-Access-Token', first.accessToken).expect(200)).body.items as {
      type: string;
      schema: object;
      operational: boolean;
    }[];
    expect(catalog.filter((item) => item.operational).map((item) => item.type)).to.deep.equal(OPERATIONAL);
    const ajv = new Ajv2020({ strict: false });
    addFormats.default(ajv);
    validators = new Map(catalog.map((item) => [item.type, ajv.compile(item.schema)]));
  });

  beforeEach(async () => {
    user = await createUserFixture();
    sick = await new Receiver().start();
    watcher = await new Receiver().start();
  });

  afterEach(async () => {
    await Promise.all(started.splice(0).map((worker) => worker.stop(1_000)));
    await sick.stop();
    await watcher.stop();
  });

  const auth = () => ({ 'X-Access-Token': user.accessToken });

  async function createEndpoint(body: Record<string, unknown>, on: OutboundApp = app) {
    const response = await on.request.post('/api/v1/webhook-endpoints').set(auth()).send(body).expect(201);
    rememberSecret(response.body.secret);
    return response.body as { id: string; secret: string };
  }

  async function startWorker(on: OutboundApp = app) {
    await on.worker.start();
    started.push(on.worker);
  }

  /** The operational messages the watcher received, verified and checked against their schemas. */
  function received(secret: string) {
    return watcher.requests.map((request) => {
      const body = verifyDelivery(secret, request) as { type: string; data: Record<string, unknown> };
      expect(validators.get(body.type)!(body), body.type).to.equal(true);
      return body;
    });
  }

  it('message.attempt.failing at the first failure, message.attempt.exhausted after the last attempt, endpoint.recovered at the next success', async () => {
    const endpoint = await createEndpoint({ url: sick.url, event_types: ['webhook.test'] });
    const ops = await createEndpoint({ url: watcher.url, event_types: OPERATIONAL });
    const everything = await createEndpoint({ url: `${watcher.url}?all` });
    await startWorker();
    sick.answers = [500, 503];
    const test = await app.request.post(`/api/v1/webhook-endpoints/${endpoint.id}/test`).set(auth()).expect(202);
    expect(await waitFor(() => watcher.requests.filter((r) => r.url === '/hook').length >= 2, 15_000)).to.equal(true);
    await app.request.post(`/api/v1/webhook-endpoints/${endpoint.id}/test`).set(auth()).expect(202);
    expect(await waitFor(() => watcher.requests.filter((r) => r.url === '/hook').length >= 3, 15_000)).to.equal(true);

    const bodies = received(ops.secret);
    expect(bodies.map((b) => b.type)).to.deep.equal(['message.attempt.failing', 'message.attempt.exhausted', 'endpoint.recovered']);
    const common = { endpoint_id: endpoint.id, url: sick.url, message_id: test.body.id, message_type: 'webhook.test' };
    expect(bodies[0]!.data).to.deep.equal({ ...common, attempt: 1, status_code: 500, error: 'The receiver answered 500' });
    expect(bodies[1]!.data).to.deep.equal({ ...common, attempt: 2, status_code: 503, error: 'The receiver answered 503' });
    expect(bodies[2]!.data).to.include({ endpoint_id: endpoint.id, url: sick.url });
    const [attempt1] = (await app.request.get(`/api/v1/webhook-endpoints/${endpoint.id}/messages/${test.body.id}/attempts`).set(auth()).expect(200)).body.items;
    expect(bodies[2]!.data.failing_since).to.equal(attempt1.started_at);
    // An endpoint without event_types gets no operational message; the one it is about never does.
    const all = (await app.request.get(`/api/v1/webhook-endpoints/${everything.id}/messages`).set(auth()).expect(200)).body.items as { type: string }[];
    expect(all.filter((m) => OPERATIONAL.includes(m.type))).to.deep.equal([]);
    expect(sick.ofType('message.attempt.failing')).to.deep.equal([]);
  });

  it('endpoint.disabled with why: 410 Gone, or failing for longer than OUTBOUND_WEBHOOK_DISABLE_AFTER_HOURS', async () => {
    const gone = await createEndpoint({ url: `${sick.url}?gone`, event_types: ['webhook.test'] });
    const ops = await createEndpoint({ url: watcher.url, event_types: ['endpoint.disabled'] });
    await startWorker();
    sick.answers = [410];
    await app.request.post(`/api/v1/webhook-endpoints/${gone.id}/test`).set(auth()).expect(202);
    expect(await waitFor(() => watcher.requests.length >= 1, 15_000)).to.equal(true);
    expect(received(ops.secret)[0]!.data).to.deep.equal({ endpoint_id: gone.id, url: `${sick.url}?gone`, reason: 'The receiver answered 410 Gone', failing_since: null });

    await Promise.all(started.splice(0).map((worker) => worker.stop(1_000)));
    const quick = await outboundApp({ retryScheduleMs: [0, 300], disableAfterMs: 1 });
    const failing = await createEndpoint({ url: `${sick.url}?failing`, event_types: ['webhook.test'] }, quick);
    await startWorker(quick);
    sick.answers = [500, 500];
    await quick.request.post(`/api/v1/webhook-endpoints/${failing.id}/test`).set(auth()).expect(202);
    expect(await waitFor(() => watcher.requests.length >= 2, 15_000)).to.equal(true);
    await new Promise((resolve) => setTimeout(resolve, 500)); // a second endpoint.disabled would have arrived by now
    const disabled = received(ops.secret).filter((b) => b.data.endpoint_id === failing.id);
    expect(disabled).to.have.length(1);
    expect(disabled[0]!.data).to.include({ reason: 'Every attempt failed for too long' });
  });

  it('stores no operational message when no other enabled endpoint lists its type', async () => {
    const endpoint = await createEndpoint({ url: sick.url, event_types: ['webhook.test', ...OPERATIONAL] });
    await startWorker();
    sick.answers = [500, 500];
    await app.request.post(`/api/v1/webhook-endpoints/${endpoint.id}/test`).set(auth()).expect(202);
    expect(await waitFor(async () => (await app.request.get(`/api/v1/webhook-endpoints/${endpoint.id}/messages`).set(auth())).body.items[0].state === 'failed', 15_000)).to.equal(true);
    const stored = await testDatabase().orm.em.getConnection().execute(`select count(*)::integer as n from webhook_messages where source_endpoint_id is not null`);
    expect(stored[0]!.n).to.equal(0);
  });
});
