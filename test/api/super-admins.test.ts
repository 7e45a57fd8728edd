import { expect } from 'chai';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture } from '../helpers/fixtures.ts';

const SUPER_ADMINS = '/api/admin/super-admins';

describe('GET /api/admin/super-admins', () => {
  let client: TestApp;
  before(async () => {
    client = await createTestApp();
  });

  it('returns 200 with every super admin, ordered by e-mail, and no one else', async () => {
    const carol = await createUserFixture({ email: 'carol@example.com', superAdmin: true });
    const alice = await createUserFixture({ email: 'alice@example.com', superAdmin: true });
    await createUserFixture({ email: 'bob@example.com' });

    const response = await client.request.get(SUPER_ADMINS).set('X-Access-Token', carol.accessToken).expect(200);
    expect(response.body).to.deep.equal({
      super_admins: [
        { user_id: alice.userId, email: 'alice@example.com' },
        { user_id: carol.userId, email: 'carol@example.com' },
      ],
    });
  });

  it('returns 401 without X-Access-Token', async () => {
    const response = await client.request.get(SUPER_ADMINS).expect(401);
    expect(response.body).to.deep.equal({ detail: 'Missing X-Access-Token header' });
  });

  it('returns 401 for an unknown access token', async () => {
    const response = await client.request.get(SUPER_ADMINS).set('X-Access-Token', 'apat_unknown').expect(401);
    expect(response.body).to.deep.equal({ detail: 'Invalid X-Access-Token' });
  });

  it('returns 401 for a session API key, even a super admin’s, where X-Access-Token is required', async () => {
    const admin = await createUserFixture({ superAdmin: true });
    await client.request.get(SUPER_ADMINS).set('X-Session-API-Key', admin.sessionApiKey).expect(401);
    await client.request.get(SUPER_ADMINS).set('X-Access-Token', admin.sessionApiKey).expect(401);
  });

  it('returns 403 for a user without MANAGE_SUPER_ADMINS', async () => {
    const member = await createUserFixture();
    const response = await client.request.get(SUPER_ADMINS).set('X-Access-Token', member.accessToken).expect(403);
    expect(response.body).to.deep.equal({ detail: 'This operation requires the MANAGE_SUPER_ADMINS permission' });
  });
});
