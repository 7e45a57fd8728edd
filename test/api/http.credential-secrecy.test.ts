import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Response } from 'supertest';
import { IdentityService } from '../../src/identity/identity-service.ts';
import { generateSecret, hashSecret } from '../../src/identity/secrets.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { postEvents } from '../helpers/webhook.ts';

describe('credential secrecy', () => {
  let client: TestApp;
  before(async () => {
    client = await createTestApp();
  });

  it('no secret or hash appears in any response or log line after issuing', async () => {
    const identity = new IdentityService(testDatabase().orm.em);
    const { key } = await identity.createUser('cli:test', 'root@example.com', { superAdmin: true, firstKey: { kind: 'access_token' } });
    const accessToken = key!.secret;
    const { secret: sessionApiKey } = await identity.issueKey('cli:test', { email: 'root@example.com' }, { kind: 'session_api_key' });
    const member = await createUserFixture();
    const unknownToken = generateSecret('access_token');

    const responses: Response[] = [];
    const send = async (request: Promise<Response>) => {
      const response = await request;
      responses.push(response);
      return response;
    };
    const models = '/api/admin/verified-models';
    const created = await send(client.request.post(models).set('X-Access-Token', accessToken).send({ model_name: 'gpt-4o', provider: 'openai' }));
    await send(client.request.post(models).set('X-Access-Token', accessToken).send({ model_name: 'gpt-4o', provider: 'openai' }));
    await send(client.request.post(models).set('X-Access-Token', accessToken).send({ model_name: ' ', provider: 'openai' }));
    await send(client.request.post(models).set('X-Access-Token', member.accessToken).send({ model_name: 'o3', provider: 'openai' }));
    await send(client.request.get(models).set('X-Access-Token', accessToken));
    await send(client.request.patch(`${models}/${created.body.id}`).set('X-Access-Token', accessToken).send({ is_enabled: false }));
    await send(client.request.delete(`${models}/${created.body.id}`).set('X-Access-Token', accessToken));
    await send(client.request.get('/api/admin/super-admins').set('X-Access-Token', accessToken));
    await send(client.request.get('/api/admin/super-admins').set('X-Access-Token', member.accessToken));
    await send(client.request.get('/api/admin/super-admins').set('X-Access-Token', sessionApiKey));
    await send(client.request.get('/api/admin/super-admins').set('X-Access-Token', unknownToken));
    const conversationId = randomUUID();
    await send(postEvents(client, sessionApiKey, conversationId, [minimalEvent('PauseEvent')]));
    await send(postEvents(client, accessToken, conversationId, [minimalEvent('PauseEvent')]));
    await identity.revoke('cli:test', accessToken);
    await send(client.request.get('/api/admin/super-admins').set('X-Access-Token', accessToken));

    expect(responses.map((r) => r.status)).to.deep.equal([201, 409, 422, 403, 200, 200, 204, 200, 403, 401, 401, 200, 401, 401]);
    const secrets = [accessToken, sessionApiKey, member.accessToken, member.sessionApiKey, unknownToken];
    const stored = await testDatabase().orm.em.getConnection().execute<{ secret_hash: string }[]>('select secret_hash from credentials');
    const forbidden = [...secrets, ...secrets.map(hashSecret), ...stored.map((row) => row.secret_hash)];
    const responseText = responses.map((r) => JSON.stringify(r.headers) + r.text).join('\n');
    const logText = client.logs.join('');
    expect(logText).to.include('"status":201');
    for (const value of forbidden) {
      expect(responseText).to.not.include(value);
      expect(logText).to.not.include(value);
    }
  });
});
