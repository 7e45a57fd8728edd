import { createHash, createHmac } from 'node:crypto';
import { expect } from 'chai';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';

const WORKSPACES = '/integration/issuetracker/workspaces';
const SECRET = 'whsec_tracker_events_0123456789';

function sign(body: string, secret = SECRET): string {
  return `sha256=${createHmac('sha256', secret).update(Buffer.from(body, 'utf8')).digest('hex')}`;
}

async function deliveries() {
  return testDatabase()
    .orm.em.getConnection()
    .execute<{ delivery_id: string; payload: string }[]>(
      'select delivery_id, payload::text as payload from tracker_deliveries order by id',
    );
}

describe('POST /integration/issuetracker/events/{workspace_name}', () => {
  let client: TestApp;
  let admin: UserFixture;
  before(async () => {
    client = await createTestApp();
  });
  beforeEach(async () => {
    admin = await createUserFixture();
    await client.request
      .post(WORKSPACES)
      .set('X-Access-Token', admin.accessToken)
      .send({ workspace_name: 'acme', webhook_secret: SECRET, svc_acc_email: 'bot@acme.example', svc_acc_api_key: 'ATATT_key', is_active: true })
      .expect(201);
  });

  const deliver = (body: string, headers: Record<string, string>, workspace = 'acme') => {
    const request = client.request.post(`/integration/issuetracker/events/${workspace}`).set('Content-Type', 'application/json');
    for (const [name, value] of Object.entries(headers)) request.set(name, value);
    return request.send(body);
  };

  const BODY = '{"webhookEvent":"jira:issue_created","timestamp":1736938800000,"issue":{"key":"ACME-42"}}';

  it('stores a correctly signed delivery as received and answers 200', async () => {
    const response = await deliver(BODY, { 'X-Hub-Signature': sign(BODY), 'X-Atlassian-Webhook-Identifier': 'delivery-1' }).expect(200);
    expect(response.body).to.deep.equal({ success: true, delivery_id: 'delivery-1', duplicate: false });
    expect(await deliveries()).to.deep.equal([{ delivery_id: 'delivery-1', payload: BODY }]);
  });

  it('reads a body starting with a UTF-8 byte order mark as every JSON operation does: signed as sent, stored as its JSON text', async () => {
    const withBom = `\uFEFF${BODY}`;
    const response = await deliver(withBom, { 'X-Hub-Signature': sign(withBom), 'X-Atlassian-Webhook-Identifier': 'delivery-bom' }).expect(200);
    expect(response.body).to.deep.equal({ success: true, delivery_id: 'delivery-bom', duplicate: false });
    expect(await deliveries()).to.deep.equal([{ delivery_id: 'delivery-bom', payload: BODY }]);
  });

  it('accepts the signature in upper-case hex', async () => {
    await deliver(BODY, { 'X-Hub-Signature': `sha256=${sign(BODY).slice('sha256='.length).toUpperCase()}` }).expect(200);
  });

  it('acknowledges a replayed delivery (same id) with duplicate: true and stores it once', async () => {
    const headers = { 'X-Hub-Signature': sign(BODY), 'X-Atlassian-Webhook-Identifier': 'delivery-7' };
    await deliver(BODY, headers).expect(200);
    const replay = await deliver(BODY, headers).expect(200);
    expect(replay.body).to.deep.equal({ success: true, delivery_id: 'delivery-7', duplicate: true });
    const other = '{"webhookEvent":"jira:issue_updated"}';
    await deliver(other, { 'X-Hub-Signature': sign(other), 'X-Atlassian-Webhook-Identifier': 'delivery-8' }).expect(200);
    expect((await deliveries()).map((d) => d.delivery_id)).to.deep.equal(['delivery-7', 'delivery-8']);
  });

  it('without a delivery id, keys the delivery by the SHA-256 of its body', async () => {
    const first = await deliver(BODY, { 'X-Hub-Signature': sign(BODY) }).expect(200);
    const digest = createHash('sha256').update(BODY).digest('hex');
    expect(first.body).to.deep.equal({ success: true, delivery_id: `sha256:${digest}`, duplicate: false });
    expect((await deliver(BODY, { 'X-Hub-Signature': sign(BODY) }).expect(200)).body.duplicate).to.equal(true);
    expect(await deliveries()).to.have.length(1);
  });

  it('returns 401 for an unsigned delivery and stores nothing', async () => {
    const response = await deliver(BODY, {}).expect(401);
    expect(response.body).to.deep.equal({ detail: 'Missing X-Hub-Signature header' });
    expect(await deliveries()).to.deep.equal([]);
  });

  it('returns 401 for a wrong, malformed or foreign signature and stores nothing', async () => {
    const wrong = [
      sign(BODY, 'another-secret'),
      sign(`${BODY} `),
      sign(BODY).replace('sha256=', 'sha1='),
      sign(BODY).slice(0, -2),
      `sha256=${'0'.repeat(64)}`,
      'garbage',
    ];
    for (const signature of wrong) {
      const response = await deliver(BODY, { 'X-Hub-Signature': signature }).expect(401);
      expect(response.body).to.deep.equal({ detail: 'Invalid X-Hub-Signature' });
    }
    expect(await deliveries()).to.deep.equal([]);
  });

  it('returns 404 for an unknown or inactive workspace', async () => {
    await deliver(BODY, { 'X-Hub-Signature': sign(BODY) }, 'no-such-workspace').expect(404);
    await client.request.patch(`${WORKSPACES}/acme`).set('X-Access-Token', admin.accessToken).send({ is_active: false }).expect(200);
    const response = await deliver(BODY, { 'X-Hub-Signature': sign(BODY) }).expect(404);
    expect(response.body).to.deep.equal({ detail: 'No active issue-tracker workspace has this name.' });
    expect(await deliveries()).to.deep.equal([]);
  });

  it('verifies against the secret of the latest registration', async () => {
    await client.request
      .post(WORKSPACES)
      .set('X-Access-Token', admin.accessToken)
      .send({ workspace_name: 'acme', webhook_secret: 'rotated_secret', svc_acc_email: 'bot@acme.example', svc_acc_api_key: 'ATATT_key', is_active: true })
      .expect(200);
    await deliver(BODY, { 'X-Hub-Signature': sign(BODY) }).expect(401);
    await deliver(BODY, { 'X-Hub-Signature': sign(BODY, 'rotated_secret') }).expect(200);
  });

  it('stores the exact text of the body: \\u0000, lone surrogates and long numbers survive', async () => {
    const body = '{"comment":{"body":"nul \\u0000 and \\ud800"},"n":12345678901234567890123,"x":1e400}';
    await deliver(body, { 'X-Hub-Signature': sign(body), 'X-Atlassian-Webhook-Identifier': 'lossless' }).expect(200);
    expect(await deliveries()).to.deep.equal([{ delivery_id: 'lossless', payload: body }]);
  });

  it('answers 422 for a body that is not JSON, 415 for another media type', async () => {
    const text = '{"not json';
    await deliver(text, { 'X-Hub-Signature': sign(text) }).expect(422);
    await client.request
      .post('/integration/issuetracker/events/acme')
      .set('Content-Type', 'text/plain')
      .set('X-Hub-Signature', sign(BODY))
      .send(BODY)
      .expect(415);
  });
});
