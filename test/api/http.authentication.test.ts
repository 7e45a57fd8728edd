import { expect } from 'chai';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { createUserFixture } from '../helpers/fixtures.ts';
import { hashSecret } from '../../src/identity/secrets.ts';

describe('credentials', () => {
  let client: TestApp;
  before(async () => {
    client = await createTestApp();
  });

  const lastUsedAt = async (secret: string) => {
    const [row] = await testDatabase()
      .orm.em.getConnection()
      .execute<{ last_used_at: string | null }[]>('select last_used_at from credentials where secret_hash = ?', [hashSecret(secret)]);
    return row!.last_used_at === null ? null : new Date(row!.last_used_at);
  };

  it('records when a credential was last used', async () => {
    const admin = await createUserFixture({ superAdmin: true });
    expect(await lastUsedAt(admin.accessToken)).to.equal(null);
    await client.request.get('/api/admin/super-admins').set('X-Access-Token', admin.accessToken).expect(200);
    // The write is off the request path; give it a moment.
    let usedAt: Date | null = null;
    for (let attempt = 0; attempt < 50 && !usedAt; attempt++) {
      usedAt = await lastUsedAt(admin.accessToken);
      if (!usedAt) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(usedAt).to.be.an.instanceOf(Date);
    expect(Date.now() - usedAt!.getTime()).to.be.lessThan(60_000);
    expect(await lastUsedAt(admin.sessionApiKey)).to.equal(null);
  });

  it('refuses a revoked credential with 401', async () => {
    const admin = await createUserFixture({ superAdmin: true });
    await client.request.get('/api/admin/super-admins').set('X-Access-Token', admin.accessToken).expect(200);
    await testDatabase()
      .orm.em.getConnection()
      .execute('update credentials set revoked_at = now() where secret_hash = ?', [hashSecret(admin.accessToken)]);
    const response = await client.request.get('/api/admin/super-admins').set('X-Access-Token', admin.accessToken).expect(401);
    expect(response.body).to.deep.equal({ detail: 'Invalid X-Access-Token' });
  });
});
