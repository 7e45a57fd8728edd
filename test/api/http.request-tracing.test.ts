import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { postEvents, webhookPath } from '../helpers/webhook.ts';

type LogLine = Record<string, unknown> & { msg?: string; requestId?: string };

describe('request tracing', () => {
  let client: TestApp;
  let owner: UserFixture;
  before(async () => {
    client = await createTestApp();
  });
  beforeEach(async () => {
    owner = await createUserFixture();
    client.logs.length = 0;
  });

  const lines = (): LogLine[] => client.logs.map((line) => JSON.parse(line) as LogLine);
  const accessLine = (requestId: string) => {
    const found = lines().filter((line) => line.msg === 'request' && line.requestId === requestId);
    expect(found, `access log lines of ${requestId}`).to.have.length(1);
    return found[0]!;
  };

  it('puts the request id on every log line of a request, the service lines included', async () => {
    const requestId = `trace-${randomUUID()}`;
    const response = await postEvents(client, owner.sessionApiKey, randomUUID(), [minimalEvent('PauseEvent', { id: randomUUID() })])
      .set('X-Request-Id', requestId)
      .expect(200);
    expect(response.headers['x-request-id']).to.equal(requestId);
    const logged = lines();
    // The service logs each ingested batch at debug level (the test logger writes debug lines).
    expect(logged.map((line) => line.msg)).to.include('events ingested');
    for (const line of logged) expect(line.requestId, JSON.stringify(line)).to.equal(requestId);
  });

  it('writes one access line with operationId, status, latency and the caller user id, never the credential', async () => {
    const requestId = `trace-${randomUUID()}`;
    await client.request
      .get('/api/v1/conversations')
      .set('X-Access-Token', owner.accessToken)
      .set('X-Request-Id', requestId)
      .expect(200);
    const line = accessLine(requestId);
    expect(line).to.include({ operationId: 'listConversations', status: 200, method: 'GET', userId: owner.userId });
    expect(line.ms).to.be.a('number').that.is.at.least(0);
    expect(client.logs.join('')).not.to.include(owner.accessToken);
  });

  it('logs refused and unmatched requests too, with a fresh id when the caller sent none', async () => {
    const refused = await client.request.get('/api/admin/super-admins').set('X-Access-Token', 'apat_not-a-real-token').expect(401);
    const refusedId = refused.headers['x-request-id'] as string;
    expect(refusedId).to.match(/^[0-9a-f-]{36}$/);
    const refusedLine = accessLine(refusedId);
    expect(refusedLine).to.include({ operationId: 'listSuperAdmins', status: 401 });
    expect(refusedLine).not.to.have.property('userId');

    const forbidden = await client.request.get('/api/admin/super-admins').set('X-Access-Token', owner.accessToken).expect(403);
    expect(accessLine(forbidden.headers['x-request-id'] as string)).to.include({ status: 403, userId: owner.userId });

    const unmatched = await client.request.get('/nowhere').expect(404);
    const unmatchedLine = accessLine(unmatched.headers['x-request-id'] as string);
    expect(unmatchedLine).to.include({ status: 404, path: '/nowhere' });
    expect(unmatchedLine).not.to.have.property('operationId');
    expect(client.logs.join('')).not.to.include('apat_not-a-real-token');
  });

  it('gives concurrent requests their own ids', async () => {
    const ids = Array.from({ length: 8 }, () => `c-${randomUUID()}`);
    await Promise.all(
      ids.map((id) =>
        postEvents(client, owner.sessionApiKey, randomUUID(), [minimalEvent('PauseEvent', { id: randomUUID() })])
          .set('X-Request-Id', id)
          .expect(200),
      ),
    );
    const ingested = lines().filter((line) => line.msg === 'events ingested');
    expect(ingested.map((line) => line.requestId).sort()).to.deep.equal([...ids].sort());
    // Each service line carries the id of the request that caused it: its conversation is the one
    // in that request's path.
    for (const line of ingested) {
      expect(accessLine(line.requestId!).path).to.equal(webhookPath(String(line.conversationId)));
    }
  });
});
