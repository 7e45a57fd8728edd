import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { addOrganizationMember, createOrganizationFixture } from '../helpers/org-members.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';

/** Idempotency keys in organizations: a key is the person's, and the organization is part of the request. */
describe('idempotency keys of members of an organization (POST with Idempotency-Key and X-Org-Id)', () => {
  let client: TestApp;
  let admin: UserFixture;
  let member: UserFixture;
  let team: string;
  before(async () => {
    client = await createTestApp();
  });
  beforeEach(async () => {
    admin = await createUserFixture();
    member = await createUserFixture();
    team = await createOrganizationFixture(admin.userId);
    await addOrganizationMember(team, member.userId, 'member');
  });

  const createKey = (who: UserFixture, key: string, orgId?: string) => {
    const request = client.request.post('/api/keys').set('X-Access-Token', who.accessToken).set('Idempotency-Key', key);
    return (orgId ? request.set('X-Org-Id', orgId) : request).send({ kind: 'session_api_key', name: 'runtime' });
  };
  const keysNamedRuntime = async (userId: string) =>
    (await testDatabase().orm.em.getConnection().execute<{ org_id: string }[]>("select org_id from credentials where user_id = ? and name = 'runtime'", [userId])).map((row) => row.org_id);

  it("never answers one member's request with another member's response (a key's secret): each gets their own key", async () => {
    const key = randomUUID();
    const mine = await createKey(admin, key, team).expect(201);
    rememberSecret(mine.body.secret);
    const theirs = await createKey(member, key, team).expect(201);
    rememberSecret(theirs.body.secret);
    expect(theirs.headers['idempotent-replayed']).to.equal(undefined);
    expect(theirs.body.secret).to.not.equal(mine.body.secret);
    expect(await keysNamedRuntime(member.userId)).to.deep.equal([team]);
    // The same person again, in the same organization: the first response once more.
    const again = await createKey(member, key, team).expect(201);
    expect(again.headers['idempotent-replayed']).to.equal('true');
    expect(again.body).to.deep.equal(theirs.body);
  });

  it('treats the same key sent in another organization as another request (422), creating nothing there', async () => {
    const key = randomUUID();
    const first = await createKey(member, key, team).expect(201);
    rememberSecret(first.body.secret);
    const elsewhere = await createKey(member, key).expect(422);
    expect(elsewhere.body.detail[0].type).to.equal('idempotency_key_reused');
    expect(await keysNamedRuntime(member.userId)).to.deep.equal([team]);
  });
});
