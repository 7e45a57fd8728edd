import { expect } from 'chai';
import type { DeliveryWorker } from '../../src/outbound/delivery-worker.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { outboundApp, Receiver, verifyDelivery, type OutboundApp } from '../helpers/outbound.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';
import { waitFor } from '../helpers/server-process.ts';

describe('outbound webhooks: custom headers per endpoint', function () {
  this.timeout(60_000);

  let app: OutboundApp;
  let user: UserFixture;
  let receiver: Receiver;
  const started: DeliveryWorker[] = [];
  const bearer = 'Bearer hdr_7c1f0e9a2b4d6f8a0c2e4f6a8b0d2f4a';

  before(async () => {
    app = await outboundApp();
    rememberSecret(bearer);
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
  const sql = (text: string, params: unknown[] = []) => testDatabase().orm.em.getConnection().execute(text, params);

  async function create(body: Record<string, unknown>) {
    const response = await app.request.post('/api/v1/webhook-endpoints').set(auth()).send(body);
    if (response.status === 201) rememberSecret(response.body.secret);
    return response;
  }

  async function sendTest(id: string) {
    const before = receiver.requests.length;
    await app.request.post(`/api/v1/webhook-endpoints/${id}/test`).set(auth()).expect(202);
    expect(await waitFor(() => receiver.requests.length > before, 15_000)).to.equal(true);
    return receiver.requests[before]!;
  }

  it('sends them with every message beside the signature; shows all but the sensitive values; stores them encrypted', async () => {
    const created = await create({ url: receiver.url, headers: { Authorization: bearer, 'X-Team': 'infra', 'User-Agent': 'ours/2' } });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    expect(created.body.headers).to.deep.equal({ 'X-Team': 'infra', 'User-Agent': 'ours/2' });
    expect(created.body.sensitive_headers).to.deep.equal(['Authorization']);
    const listed = await app.request.get('/api/v1/webhook-endpoints').set(auth()).expect(200);
    expect(JSON.stringify(listed.body)).to.not.include(bearer);
    const [stored] = await sql('select headers from webhook_endpoints where id = ?', [created.body.id]);
    expect(stored!.headers).to.match(/^v1:/).and.not.include('infra');

    await app.worker.start();
    started.push(app.worker);
    const request = await sendTest(created.body.id);
    expect(request.headers).to.include({ authorization: bearer, 'x-team': 'infra', 'user-agent': 'ours/2', 'content-type': 'application/json' });
    verifyDelivery(created.body.secret, request);

    const audit = await sql(`select summary::text as summary from audit_log where target_type = 'webhook_endpoint'`);
    expect(audit[0]!.summary).to.include('Authorization').and.not.include(bearer);
  });

  it('PATCH replaces them; null removes them', async () => {
    const created = await create({ url: receiver.url, headers: { 'X-Team': 'infra', 'X-Env': 'prod' } });
    const changed = await app.request.patch(`/api/v1/webhook-endpoints/${created.body.id}`).set(auth()).send({ headers: { 'X-Env': 'staging' } }).expect(200);
    expect(changed.body.headers).to.deep.equal({ 'X-Env': 'staging' });
    await app.worker.start();
    started.push(app.worker);
    const first = await sendTest(created.body.id);
    expect(first.headers['x-env']).to.equal('staging');
    expect(first.headers).to.not.have.property('x-team');
    const cleared = await app.request.patch(`/api/v1/webhook-endpoints/${created.body.id}`).set(auth()).send({ headers: null }).expect(200);
    expect(cleared.body).to.deep.include({ headers: {}, sensitive_headers: [] });
    const second = await sendTest(created.body.id);
    expect(second.headers).to.not.have.property('x-env');
    const untouched = await app.request.patch(`/api/v1/webhook-endpoints/${created.body.id}`).set(auth()).send({ description: 'd' }).expect(200);
    expect(untouched.body.headers).to.deep.equal({});
  });

  for (const [name, why] of [
    ['webhook-id', 'a signature header'],
    ['Webhook-Timestamp', 'a signature header'],
    ['WEBHOOK-SIGNATURE', 'a signature header'],
    ['Connection', 'a hop-by-hop header'],
    ['Transfer-Encoding', 'a hop-by-hop header'],
    ['Upgrade', 'a hop-by-hop header'],
    ['Host', 'written by the server'],
    ['Content-Length', 'written by the server'],
  ] as [string, string][]) {
    it(`returns 422 naming ${name} (${why}), on create and update, storing nothing`, async () => {
      const refused = await create({ url: receiver.url, headers: { 'X-Ok': '1', [name]: 'x' } });
      expect(refused.status).to.equal(422);
      expect(refused.body.detail[0]).to.deep.include({ loc: ['body', 'headers', name], msg: `The header ${name} cannot be set: it is ${why}` });
      expect((await sql('select count(*)::integer as n from webhook_endpoints'))[0]!.n).to.equal(0);
      const created = await create({ url: receiver.url });
      const patched = await app.request.patch(`/api/v1/webhook-endpoints/${created.body.id}`).set(auth()).send({ headers: { [name]: 'x' } }).expect(422);
      expect(patched.body.detail[0].loc).to.deep.equal(['body', 'headers', name]);
    });
  }

  it('returns 422 for a header given twice in two cases, a name that is not a token, or a value with a line break', async () => {
    const twice = await create({ url: receiver.url, headers: { 'X-A': '1', 'x-a': '2' } });
    expect(twice.status).to.equal(422);
    expect(twice.body.detail[0].msg).to.equal('The header x-a is given twice');
    expect((await create({ url: receiver.url, headers: { 'X A': '1' } })).status).to.equal(422);
    expect((await create({ url: receiver.url, headers: { 'X-A': 'one\r\nX-Injected: two' } })).status).to.equal(422);
    expect((await create({ url: receiver.url, headers: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`X-${i}`, 'v'])) })).status).to.equal(422);
  });
});
