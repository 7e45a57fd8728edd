import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { postEvents } from '../helpers/webhook.ts';

interface Organization {
  id: string;
  name: string;
  personal: boolean;
  role: string;
  created_at: string;
}
interface Member {
  user_id: string;
  email: string;
  role: string;
  joined_at: string;
}
interface CreatedInvitation {
  id: string;
  org_id: string;
  email: string;
  role: string;
  invited_by: string | null;
  created_at: string;
  expires_at: string;
  token: string;
}

const query = async <T>(sql: string, values: unknown[] = []): Promise<T[]> => (await testDatabase().orm.em.getConnection().execute(sql, values)) as T[];
const auditActions = async (orgId: string): Promise<string[]> =>
  (await query<{ action: string }>(`select action from audit_log where summary->>'org_id' = ? order by id`, [orgId])).map((row) => row.action);

describe('organizations: organizations, members and invitations', () => {
  let client: TestApp;
  let ada: UserFixture;
  let bob: UserFixture;
  let eve: UserFixture;
  before(async () => {
    client = await createTestApp();
  });
  beforeEach(async () => {
    ada = await createUserFixture({ email: `ada-${randomUUID().slice(0, 8)}@acme.example` });
    bob = await createUserFixture({ email: `bob-${randomUUID().slice(0, 8)}@acme.example` });
    eve = await createUserFixture();
  });

  const as = (user: UserFixture) => ({
    get: (path: string) => client.request.get(path).set('X-Access-Token', user.accessToken),
    post: (path: string, body?: object) => client.request.post(path).set('X-Access-Token', user.accessToken).send(body),
    patch: (path: string, body: object) => client.request.patch(path).set('X-Access-Token', user.accessToken).send(body),
    delete: (path: string) => client.request.delete(path).set('X-Access-Token', user.accessToken),
  });
  const createOrg = async (user: UserFixture, name = 'Acme research'): Promise<Organization> => {
    const reply = await as(user).post('/api/orgs', { name });
    expect(reply.status, reply.text).to.equal(201);
    return reply.body as Organization;
  };
  const invite = async (by: UserFixture, orgId: string, email: string, role = 'member'): Promise<CreatedInvitation> => {
    const reply = await as(by).post(`/api/orgs/${orgId}/invitations`, { email, role });
    expect(reply.status, reply.text).to.equal(201);
    rememberSecret((reply.body as CreatedInvitation).token);
    return reply.body as CreatedInvitation;
  };
  const join = async (user: UserFixture, orgId: string, role: string, by = ada): Promise<void> => {
    const invitation = await invite(by, orgId, user.email, role);
    const reply = await as(user).post(`/api/invitations/${invitation.token}/accept`);
    expect(reply.status, reply.text).to.equal(200);
  };

  describe('POST /api/orgs and GET /api/orgs', () => {
    it('creates an organization whose owner is the caller, listed after the personal one', async () => {
      const reply = await as(ada).post('/api/orgs', { name: '  Acme research  ' }).set('Idempotency-Key', randomUUID());
      expect(reply.status, reply.text).to.equal(201);
      expect(reply.body).to.include({ name: 'Acme research', personal: false, role: 'owner' });
      expect(reply.headers.location).to.equal(`/api/orgs/${reply.body.id}`);
      const list = await as(ada).get('/api/orgs').expect(200);
      expect(list.body.organizations.map((o: Organization) => [o.id, o.personal, o.role])).to.deep.equal([
        [ada.orgId, true, 'owner'],
        [reply.body.id, false, 'owner'],
      ]);
      expect(await auditActions(reply.body.id)).to.deep.equal(['organization.created']);
    });

    it('answers the first response again for the same Idempotency-Key, creating one organization', async () => {
      const key = randomUUID();
      const first = await as(ada).post('/api/orgs', { name: 'Once' }).set('Idempotency-Key', key).expect(201);
      const again = await as(ada).post('/api/orgs', { name: 'Once' }).set('Idempotency-Key', key).expect(201);
      expect(again.body.id).to.equal(first.body.id);
      expect(again.headers['idempotent-replayed']).to.equal('true');
      expect((await as(ada).get('/api/orgs').expect(200)).body.organizations).to.have.length(2);
    });

    it('returns 422 for a blank or missing name', async () => {
      expect((await as(ada).post('/api/orgs', { name: '   ' })).status).to.equal(422);
      expect((await as(ada).post('/api/orgs', {})).status).to.equal(422);
    });

    it('returns 401 without a credential', async () => {
      await client.request.get('/api/orgs').expect(401);
    });
  });

  describe('GET|PATCH|DELETE /api/orgs/{org_id}', () => {
    it('shows the organization with the caller role, and a foreign or unknown one as the same 404', async () => {
      const org = await createOrg(ada);
      await join(bob, org.id, 'viewer');
      expect((await as(bob).get(`/api/orgs/${org.id}`).expect(200)).body).to.include({ id: org.id, role: 'viewer' });
      const foreign = await as(eve).get(`/api/orgs/${org.id}`).expect(404);
      const unknown = await as(eve).get(`/api/orgs/${randomUUID()}`).expect(404);
      expect(foreign.body).to.deep.equal(unknown.body);
      expect(foreign.body.detail).to.equal('Organization not found');
      expect((await as(eve).get('/api/orgs/not-a-uuid')).body).to.deep.equal(unknown.body);
    });

    it('renames for an admin, 403 for a member, 422 for a blank name', async () => {
      const org = await createOrg(ada);
      await join(bob, org.id, 'admin');
      await join(eve, org.id, 'member');
      expect((await as(bob).patch(`/api/orgs/${org.id}`, { name: 'Acme lab' }).expect(200)).body).to.include({ name: 'Acme lab', role: 'admin' });
      await as(eve).patch(`/api/orgs/${org.id}`, { name: 'Mine' }).expect(403);
      await as(bob).patch(`/api/orgs/${org.id}`, { name: ' ' }).expect(422);
      expect((await as(ada).get(`/api/orgs/${org.id}`).expect(200)).body.name).to.equal('Acme lab');
      expect(await auditActions(org.id)).to.include('organization.updated');
    });

    it('deletes an empty organization (owner only); members who chose it as default fall back to their personal one', async () => {
      const org = await createOrg(ada);
      await join(bob, org.id, 'admin');
      await as(bob).patch('/api/me', { default_org_id: org.id }).expect(200);
      await as(bob).delete(`/api/orgs/${org.id}`).expect(403);
      await as(ada).delete(`/api/orgs/${org.id}`).expect(204);
      await as(ada).get(`/api/orgs/${org.id}`).expect(404);
      const me = await as(bob).get('/api/me').expect(200);
      expect(me.body).to.include({ default_org_id: bob.orgId, org_id: bob.orgId });
      expect(me.body.organizations.map((o: Organization) => o.id)).to.deep.equal([bob.orgId]);
      expect(await auditActions(org.id)).to.include('organization.deleted');
    });

    it('returns 409 for a personal organization', async () => {
      const reply = await as(ada).delete(`/api/orgs/${ada.orgId}`).expect(409);
      expect(reply.body.detail).to.equal('A personal organization cannot be deleted');
    });

    it('returns 409 saying so when the organization holds conversations', async () => {
      const org = await createOrg(ada);
      const key = await as(ada).post('/api/keys', { kind: 'session_api_key', name: 'runtime' }).set('X-Org-Id', org.id).expect(201);
      rememberSecret(key.body.secret);
      await postEvents(client, key.body.secret, randomUUID(), [minimalEvent('MessageEvent')]).expect(200);
      const reply = await as(ada).delete(`/api/orgs/${org.id}`).expect(409);
      expect(reply.body.detail).to.equal('This organization holds 1 conversation; it can only be deleted when it holds none');
      await as(ada).get(`/api/orgs/${org.id}`).expect(200);
    });
  });

  describe('members', () => {
    it('lists members with e-mail, role and joined_at, owners first; a viewer may read them', async () => {
      const org = await createOrg(ada);
      await join(bob, org.id, 'viewer');
      const reply = await as(bob).get(`/api/orgs/${org.id}/members`).expect(200);
      expect(reply.body.members.map((m: Member) => [m.user_id, m.email, m.role])).to.deep.equal([
        [ada.userId, ada.email, 'owner'],
        [bob.userId, bob.email, 'viewer'],
      ]);
      expect(Date.parse(reply.body.members[1].joined_at)).to.be.a('number').and.not.NaN;
      await as(eve).get(`/api/orgs/${org.id}/members`).expect(404);
    });

    it('changes a role (MANAGE_MEMBERS), refuses a viewer (403) and an unknown role (422)', async () => {
      const org = await createOrg(ada);
      await join(bob, org.id, 'admin');
      await join(eve, org.id, 'viewer');
      const reply = await as(bob).patch(`/api/orgs/${org.id}/members/${eve.userId}`, { role: 'member' }).expect(200);
      expect(reply.body).to.include({ user_id: eve.userId, role: 'member' });
      await as(eve).patch(`/api/orgs/${org.id}/members/${bob.userId}`, { role: 'viewer' }).expect(403);
      const unknownRole = await as(ada).patch(`/api/orgs/${org.id}/members/${eve.userId}`, { role: 'superuser' }).expect(422);
      expect(JSON.stringify(unknownRole.body)).to.include('role');
      await as(ada).patch(`/api/orgs/${org.id}/members/${randomUUID()}`, { role: 'member' }).expect(404);
      const audit = await query<{ summary: Record<string, unknown> }>(`select summary from audit_log where action = 'organization_member.role_changed' and target_id = ?`, [eve.userId]);
      expect(audit.map((row) => row.summary)).to.deep.equal([{ org_id: org.id, email: eve.email, role: 'member', previous_role: 'viewer' }]);
    });

    it('lets only an owner make or unmake an owner (MANAGE_OWNERS)', async () => {
      const org = await createOrg(ada);
      await join(bob, org.id, 'admin');
      await join(eve, org.id, 'member');
      await as(bob).patch(`/api/orgs/${org.id}/members/${eve.userId}`, { role: 'owner' }).expect(403);
      await as(bob).patch(`/api/orgs/${org.id}/members/${ada.userId}`, { role: 'admin' }).expect(403);
      await as(bob).delete(`/api/orgs/${org.id}/members/${ada.userId}`).expect(403);
      await as(ada).patch(`/api/orgs/${org.id}/members/${eve.userId}`, { role: 'owner' }).expect(200);
      await as(eve).patch(`/api/orgs/${org.id}/members/${ada.userId}`, { role: 'admin' }).expect(200);
    });

    it('returns 409 when the last owner would be demoted, removed or leave', async () => {
      const org = await createOrg(ada);
      await join(bob, org.id, 'admin');
      const demote = await as(ada).patch(`/api/orgs/${org.id}/members/${ada.userId}`, { role: 'admin' }).expect(409);
      expect(demote.body.detail).to.equal(`${ada.email} is this organization's last owner; make another member owner first`);
      await as(ada).delete(`/api/orgs/${org.id}/members/${ada.userId}`).expect(409);
      await as(ada).delete(`/api/orgs/${org.id}/membership`).expect(409);
      await as(ada).patch(`/api/orgs/${ada.orgId}/members/${ada.userId}`, { role: 'viewer' }).expect(409);
      expect((await as(ada).get(`/api/orgs/${org.id}/members`).expect(200)).body.members[0]).to.include({ user_id: ada.userId, role: 'owner' });
    });

    it('removes a member (MANAGE_MEMBERS); any member may leave (leaveOrganization); a viewer may not remove others', async () => {
      const org = await createOrg(ada);
      await join(bob, org.id, 'viewer');
      await join(eve, org.id, 'member');
      await as(bob).delete(`/api/orgs/${org.id}/members/${eve.userId}`).expect(403);
      await as(bob).delete(`/api/orgs/${org.id}/members/${bob.userId}`).expect(403);
      await as(bob).delete(`/api/orgs/${org.id}/membership`).expect(204);
      await as(ada).delete(`/api/orgs/${ada.orgId}/membership`).expect(409);
      await as(bob).get(`/api/orgs/${org.id}`).expect(404);
      await as(ada).delete(`/api/orgs/${org.id}/members/${eve.userId}`).expect(204);
      await as(ada).delete(`/api/orgs/${org.id}/members/${eve.userId}`).expect(404);
      const removed = await query<{ summary: { left: boolean } }>(`select summary from audit_log where action = 'organization_member.removed' order by id`);
      expect(removed.map((row) => row.summary.left)).to.deep.equal([true, false]);
    });

    it("stops a removed member's session API key of the organization", async () => {
      const org = await createOrg(ada);
      await join(bob, org.id, 'member');
      const key = await as(bob).post('/api/keys', { kind: 'session_api_key', name: 'runtime' }).set('X-Org-Id', org.id).expect(201);
      rememberSecret(key.body.secret);
      await postEvents(client, key.body.secret, randomUUID(), [minimalEvent('MessageEvent')]).expect(200);
      await as(ada).delete(`/api/orgs/${org.id}/members/${bob.userId}`).expect(204);
      await postEvents(client, key.body.secret, randomUUID(), [minimalEvent('MessageEvent')]).expect(401);
    });
  });

  describe('invitations', () => {
    it('invites with a token shown once (only its SHA-256 stored), lists pending ones without it, and accepts it', async () => {
      const org = await createOrg(ada);
      const before = Date.now();
      const invitation = await invite(ada, org.id, bob.email.toUpperCase(), 'viewer');
      expect(invitation).to.include({ org_id: org.id, email: bob.email, role: 'viewer', invited_by: ada.userId });
      expect(invitation.token).to.match(/^apin_[A-Za-z0-9_-]{43}$/);
      const days = (Date.parse(invitation.expires_at) - before) / 86_400_000;
      expect(days).to.be.within(6.99, 7.01);
      const stored = await query<{ token_hash: string }>('select token_hash from organization_invitations');
      expect(JSON.stringify(stored)).not.to.include(invitation.token);
      const pending = await as(ada).get(`/api/orgs/${org.id}/invitations`).expect(200);
      expect(pending.body.invitations).to.have.length(1);
      expect(pending.body.invitations[0]).not.to.have.property('token');

      const accepted = await as(bob).post(`/api/invitations/${invitation.token}/accept`).expect(200);
      expect(accepted.body).to.include({ id: org.id, role: 'viewer', personal: false });
      // Accepting again answers the same; the list of pending ones is empty.
      await as(bob).post(`/api/invitations/${invitation.token}/accept`).expect(200);
      expect((await as(ada).get(`/api/orgs/${org.id}/invitations`).expect(200)).body.invitations).to.deep.equal([]);
      expect(await auditActions(org.id)).to.deep.equal(['organization.created', 'organization_invitation.created', 'organization_invitation.accepted']);
    });

    it('keeps the token out of the access log', async () => {
      const logged = await createTestApp({});
      const org = await createOrg(ada);
      const invitation = await invite(ada, org.id, bob.email);
      await logged.request.post(`/api/invitations/${invitation.token}/accept`).set('X-Access-Token', bob.accessToken).expect(200);
      const line = logged.logs.find((entry) => entry.includes('/api/invitations/'));
      expect(line).to.include(`/api/invitations/${invitation.token.slice(0, 9)}…/accept`);
      expect(logged.logs.join('\n')).not.to.include(invitation.token);
    });

    it('refuses unknown (404), another e-mail (403), revoked, used and expired (409) tokens', async () => {
      const org = await createOrg(ada);
      await as(bob).post('/api/invitations/apin_nothing/accept').expect(404);
      const forBob = await invite(ada, org.id, bob.email);
      const foreign = await as(eve).post(`/api/invitations/${forBob.token}/accept`).expect(403);
      expect(foreign.body.detail).not.to.include(bob.email);

      await as(ada).delete(`/api/orgs/${org.id}/invitations/${forBob.id}`).expect(204);
      expect((await as(bob).post(`/api/invitations/${forBob.token}/accept`).expect(409)).body.detail).to.equal('This invitation was revoked; ask for a new one');
      await as(ada).delete(`/api/orgs/${org.id}/invitations/${forBob.id}`).expect(404);

      const expiring = await invite(ada, org.id, bob.email);
      await query(`update organization_invitations set expires_at = now() - interval '1 second' where id = ?`, [expiring.id]);
      expect((await as(bob).post(`/api/invitations/${expiring.token}/accept`).expect(409)).body.detail).to.match(/^This invitation expired at /);
      // An expired invitation gives way to a new one for the same address.
      const fresh = await invite(ada, org.id, bob.email);
      await as(bob).post(`/api/invitations/${fresh.token}/accept`).expect(200);
      await as(bob).delete(`/api/orgs/${org.id}/membership`).expect(204);
      expect((await as(bob).post(`/api/invitations/${fresh.token}/accept`).expect(409)).body.detail).to.equal('This invitation was already accepted');
      expect(await auditActions(org.id)).to.include('organization_invitation.revoked');
    });

    it("returns 404 when revoking another organization's invitation through one's own", async () => {
      const orgA = await createOrg(ada, 'A');
      const orgB = await createOrg(bob, 'B');
      const invitation = await invite(ada, orgA.id, eve.email);
      await as(bob).delete(`/api/orgs/${orgB.id}/invitations/${invitation.id}`).expect(404);
      await as(bob).delete(`/api/orgs/${orgA.id}/invitations/${invitation.id}`).expect(404);
      await as(eve).post(`/api/invitations/${invitation.token}/accept`).expect(200);
    });

    it('is accepted by an account created after the invitation, with the same token', async () => {
      const org = await createOrg(ada);
      const email = `later-${randomUUID().slice(0, 8)}@acme.example`;
      const invitation = await invite(ada, org.id, email, 'admin');
      const later = await createUserFixture({ email });
      expect((await as(later).post(`/api/invitations/${invitation.token}/accept`).expect(200)).body).to.include({ id: org.id, role: 'admin' });
    });

    it('returns 409 for a personal organization, a member already, or a pending invitation of the same address', async () => {
      expect((await as(ada).post(`/api/orgs/${ada.orgId}/invitations`, { email: bob.email, role: 'member' }).expect(409)).body.detail).to.match(/personal organization/);
      const org = await createOrg(ada);
      await as(ada).post(`/api/orgs/${org.id}/invitations`, { email: ada.email, role: 'member' }).expect(409);
      await invite(ada, org.id, bob.email);
      await as(ada).post(`/api/orgs/${org.id}/invitations`, { email: bob.email, role: 'admin' }).expect(409);
    });

    it('needs MANAGE_MEMBERS, MANAGE_OWNERS to invite an owner, and a real role', async () => {
      const org = await createOrg(ada);
      await join(bob, org.id, 'admin');
      await join(eve, org.id, 'member');
      const email = `x-${randomUUID().slice(0, 8)}@acme.example`;
      await as(eve).post(`/api/orgs/${org.id}/invitations`, { email, role: 'viewer' }).expect(403);
      await as(eve).get(`/api/orgs/${org.id}/invitations`).expect(403);
      await as(bob).post(`/api/orgs/${org.id}/invitations`, { email, role: 'owner' }).expect(403);
      await as(bob).post(`/api/orgs/${org.id}/invitations`, { email, role: 'boss' }).expect(422);
      await as(bob).post(`/api/orgs/${org.id}/invitations`, { email: 'not an address', role: 'member' }).expect(422);
      await as(ada).post(`/api/orgs/${org.id}/invitations`, { email, role: 'owner' }).expect(201);
      await as(eve).post(`/api/orgs/${randomUUID()}/invitations`, { email, role: 'member' }).expect(404);
    });
  });

  describe('GET|PATCH /api/me', () => {
    it('lists organizations, the default and the organization acted in with its permissions', async () => {
      const org = await createOrg(ada);
      await join(bob, org.id, 'viewer');
      const mine = await as(bob).get('/api/me').expect(200);
      expect(mine.body).to.include({ default_org_id: bob.orgId, org_id: bob.orgId, org_role: 'owner' });
      expect(mine.body.org_permissions).to.include('DELETE_ORGANIZATION');
      expect(mine.body.organizations.map((o: Organization) => [o.id, o.role, o.personal])).to.deep.equal([
        [bob.orgId, 'owner', true],
        [org.id, 'viewer', false],
      ]);
      const there = await as(bob).get('/api/me').set('X-Org-Id', org.id).expect(200);
      expect(there.body).to.include({ org_id: org.id, org_role: 'viewer' });
      expect(there.body.org_permissions).to.deep.equal(['NONE', 'VIEW_ORGANIZATION', 'READ_CONVERSATIONS']);
    });

    it('sets the default organization, back to the personal one with null, and refuses one you are not in (422)', async () => {
      const org = await createOrg(ada);
      await join(bob, org.id, 'member');
      expect((await as(bob).patch('/api/me', { default_org_id: org.id }).expect(200)).body).to.include({ default_org_id: org.id, org_id: bob.orgId });
      expect((await as(bob).get('/api/me').expect(200)).body).to.include({ org_id: org.id, org_role: 'member' });
      await as(bob).patch('/api/me', { default_org_id: null }).expect(200);
      expect((await as(bob).get('/api/me').expect(200)).body.default_org_id).to.equal(bob.orgId);
      const refused = await as(eve).patch('/api/me', { default_org_id: org.id }).expect(422);
      expect(refused.body.detail[0].loc).to.deep.equal(['body', 'default_org_id']);
      await as(eve).patch('/api/me', { default_org_id: randomUUID() }).expect(422);
      const audit = await query(`select 1 from audit_log where action = 'user.default_org_changed' and actor = ?`, [bob.userId]);
      expect(audit).to.have.length(2);
    });
  });

  describe('X-Org-Id on a list operation', () => {
    it("shows a member of org B acting with X-Org-Id B B's conversations only", async () => {
      const orgB = await createOrg(ada, 'B');
      await join(bob, orgB.id, 'viewer');
      const keyB = await as(ada).post('/api/keys', { kind: 'session_api_key', name: 'B runtime' }).set('X-Org-Id', orgB.id).expect(201);
      rememberSecret(keyB.body.secret);
      const inB = randomUUID();
      const inBobsOwn = randomUUID();
      await postEvents(client, keyB.body.secret, inB, [minimalEvent('MessageEvent')]).expect(200);
      await postEvents(client, bob.sessionApiKey, inBobsOwn, [minimalEvent('MessageEvent')]).expect(200);
      const ids = (reply: { body: { items: { id: string }[] } }) => reply.body.items.map((item) => item.id.replace(/-/g, ''));
      expect(ids(await as(bob).get('/api/v1/conversations').set('X-Org-Id', orgB.id).expect(200))).to.deep.equal([inB.replace(/-/g, '')]);
      expect(ids(await as(bob).get('/api/v1/conversations').expect(200))).to.deep.equal([inBobsOwn.replace(/-/g, '')]);
      await as(eve).get('/api/v1/conversations').set('X-Org-Id', orgB.id).expect(403);
      // A viewer reads, but may not write (a member's right).
      await as(bob).post('/api/keys', { kind: 'session_api_key', name: 'x' }).set('X-Org-Id', orgB.id).expect(403);
    });
  });
});

describe("a session API key in an organization acts with no more than its maker's role", () => {
  let client: TestApp;
  before(async () => {
    // No credential cache: the role change is seen by the very next request.
    client = await createTestApp({ credentialCacheTtlMs: 0 });
  });

  it('posts events as a member, and only reads once its maker is a viewer', async () => {
    const owner = await createUserFixture();
    const maker = await createUserFixture();
    const orgId = (await client.request.post('/api/orgs').set('X-Access-Token', owner.accessToken).send({ name: 'Runtime team' }).expect(201)).body.id as string;
    await query('insert into organization_members (org_id, user_id, role) values (?, ?, ?)', [orgId, maker.userId, 'member']);
    const created = await client.request.post('/api/keys').set('X-Access-Token', maker.accessToken).set('X-Org-Id', orgId).send({ kind: 'session_api_key', name: 'runtime' }).expect(201);
    rememberSecret(created.body.secret);
    const key = created.body.secret as string;
    const conversationId = randomUUID();
    const post = (id: string) =>
      client.request.post(`/api/v1/webhooks/events/${conversationId}`).set('X-Session-API-Key', key).send([minimalEvent('MessageEvent', { id })]);

    await post('e1').expect(200);
    await client.request.patch(`/api/orgs/${orgId}/members/${maker.userId}`).set('X-Access-Token', owner.accessToken).send({ role: 'viewer' }).expect(200);
    const refused = await post('e2').expect(403);
    expect(refused.body.detail).to.include('(viewer)');
    const events = await client.request.get(`/api/v1/conversations/${conversationId}/events`).set('X-Session-API-Key', key).expect(200);
    expect(events.body.items.map((item: { event: { id: string } }) => item.event.id)).to.deep.equal(['e1']);
  });
});
