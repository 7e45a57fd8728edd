import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { Authenticator } from '../../src/identity/authenticator.ts';
import type { OrgRole } from '../../src/organizations/roles.ts';
import type { components } from '../../generated/openapi.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';
import { postEvents } from '../helpers/webhook.ts';

type Schemas = components['schemas'];

function query<T>(sql: string, params: unknown[] = []): Promise<T[]> {
  return testDatabase().orm.em.getConnection().execute<T[]>(sql, params);
}

/** An organization with these members, inserted straight into the database (creating one over HTTP is another operation's test). */
async function organization(name: string, members: [UserFixture, OrgRole][]): Promise<string> {
  const id = randomUUID();
  await query('insert into organizations (id, name) values (?, ?)', [id, name]);
  for (const [user, role] of members) await query('insert into organization_members (org_id, user_id, role) values (?, ?, ?)', [id, user.userId, role]);
  return id;
}

describe('organizations: their keys, their audit log, and the instance administration of them', function () {
  this.timeout(60_000);
  let client: TestApp;
  let root: UserFixture;
  let owner: UserFixture;
  let admin: UserFixture;
  let member: UserFixture;
  let viewer: UserFixture;
  let acme: string;

  before(async () => {
    client = await createTestApp();
  });

  beforeEach(async () => {
    root = await createUserFixture({ email: `root-${randomUUID().slice(0, 6)}@instance.example`, superAdmin: true });
    const people = await Promise.all(['olga', 'adam', 'mia', 'vic'].map((name) => createUserFixture({ email: `${name}@acme.example` })));
    [owner, admin, member, viewer] = people as [UserFixture, UserFixture, UserFixture, UserFixture];
    acme = await organization('Acme', [
      [owner, 'owner'],
      [admin, 'admin'],
      [member, 'member'],
      [viewer, 'viewer'],
    ]);
  });

  const as = (user: UserFixture, orgId?: string) => {
    const headers: Record<string, string> = { 'X-Access-Token': user.accessToken, ...(orgId ? { 'X-Org-Id': orgId } : {}) };
    return {
      get: (url: string) => client.request.get(url).set(headers),
      post: (url: string, body?: object) => client.request.post(url).set(headers).send(body),
      delete: (url: string) => client.request.delete(url).set(headers),
    };
  };

  /** A session API key `user` makes through `POST /api/keys` acting in `orgId`. */
  async function keyIn(user: UserFixture, orgId: string, name: string): Promise<Schemas['CreatedKey']> {
    const response = await as(user, orgId).post('/api/keys', { kind: 'session_api_key', name });
    expect(response.status, response.text).to.equal(201);
    const key = response.body as Schemas['CreatedKey'];
    rememberSecret(key.secret);
    return key;
  }

  const webhook = (secret: string) => postEvents(client, secret, randomUUID(), [minimalEvent('PauseEvent', { id: randomUUID() })]);

  describe('GET /api/orgs/{org_id}/keys and DELETE /api/orgs/{org_id}/keys/{key_id}', () => {
    it("lists every member's session API keys of the organization with their e-mail, newest first — not access tokens, not other organizations' keys, not revoked ones", async () => {
      const first = await keyIn(member, acme, 'mia build runner');
      const second = await keyIn(admin, acme, 'adam laptop');
      const revoked = await keyIn(owner, acme, 'old one');
      await as(owner, acme).delete(`/api/keys/${revoked.id}`).expect(204);
      await keyIn(member, member.orgId, 'mia personal');
      await as(member, acme).post('/api/keys', { kind: 'access_token', name: 'a token' }).expect(201);

      const response = await as(admin).get(`/api/orgs/${acme}/keys`);
      expect(response.status, response.text).to.equal(200);
      const keys = (response.body as Schemas['OrgKeyList']).keys;
      expect(keys.map((k) => [k.id, k.email, k.name, k.kind])).to.deep.equal([
        [second.id, admin.email, 'adam laptop', 'session_api_key'],
        [first.id, member.email, 'mia build runner', 'session_api_key'],
      ]);
      expect(keys[1]!.user_id).to.equal(member.userId);
      expect(response.text).to.not.include(first.secret);
    });

    it("an admin revokes a member's key: 204, the key is refused at once (401), the audit row names the organization", async () => {
      const key = await keyIn(member, acme, 'runner');
      await webhook(key.secret).expect(200);
      await as(admin).delete(`/api/orgs/${acme}/keys/${key.id}`).expect(204);
      await webhook(key.secret).expect(401);
      const [row] = await query<{ actor: string; action: string; org_id: string }>("select actor, action, org_id from audit_log where action = 'key.revoked' and target_id = ?", [key.id]);
      expect(row).to.deep.include({ actor: admin.userId, action: 'key.revoked', org_id: acme });
      // Revoked already: 404, like an unknown one.
      await as(admin).delete(`/api/orgs/${acme}/keys/${key.id}`).expect(404);
    });

    it("another organization's key, an access token's id or an unknown id → 404, nothing revoked", async () => {
      const elsewhere = await organization('Elsewhere', [[member, 'owner']]);
      const foreign = await keyIn(member, elsewhere, 'elsewhere');
      const personal = await keyIn(member, member.orgId, 'personal');
      const token = (await as(member, acme).post('/api/keys', { kind: 'access_token', name: 't' }).expect(201)).body as Schemas['CreatedKey'];
      rememberSecret(token.secret);
      for (const id of [foreign.id, personal.id, token.id, randomUUID()]) {
        const response = await as(owner).delete(`/api/orgs/${acme}/keys/${id}`);
        expect(response.status, response.text).to.equal(404);
      }
      await webhook(foreign.secret).expect(200);
      await webhook(personal.secret).expect(200);
    });

    it('a member keeps managing their own keys through /api/keys, scoped to the organization they act in', async () => {
      const own = await keyIn(member, acme, 'mine');
      const other = await keyIn(admin, acme, 'not mine');
      const listed = (await as(member, acme).get('/api/keys').expect(200)).body as Schemas['KeyList'];
      expect(listed.keys.map((k) => k.id)).to.include(own.id).and.not.include(other.id);
      await as(member, acme).delete(`/api/keys/${other.id}`).expect(404);
      await as(member, acme).delete(`/api/keys/${own.id}`).expect(204);
      // …but not the organization's: MANAGE_KEYS is an admin's.
      await as(member).get(`/api/orgs/${acme}/keys`).expect(403);
    });
  });

  describe('GET /api/orgs/{org_id}/audit-log', () => {
    it("pages the organization's rows, newest first: its keys and its suspension, not another organization's, not instance-level rows", async () => {
      const a = await keyIn(member, acme, 'a');
      const b = await keyIn(admin, acme, 'b');
      await as(admin).delete(`/api/orgs/${acme}/keys/${a.id}`).expect(204);
      const elsewhere = await organization('Elsewhere', [[member, 'owner']]);
      await keyIn(member, elsewhere, 'elsewhere');
      await as(root).post(`/api/admin/users/${viewer.userId}/suspend`).expect(200);
      await as(root).post(`/api/admin/organizations/${acme}/suspend`).expect(200);
      await as(root).post(`/api/admin/organizations/${acme}/resume`).expect(200);

      const page1 = (await as(owner).get(`/api/orgs/${acme}/audit-log?limit=3`).expect(200)).body as Schemas['AuditLogPage'];
      expect(page1.items.map((r) => r.action)).to.deep.equal(['organization.resumed', 'organization.suspended', 'key.revoked']);
      expect(page1.items.every((r) => r.org_id === acme)).to.equal(true);
      expect(page1.people[root.userId]).to.equal(root.email);
      expect(page1.next_before_id).to.be.a('number');
      const page2 = (await as(owner).get(`/api/orgs/${acme}/audit-log?limit=3&before_id=${page1.next_before_id}`).expect(200)).body as Schemas['AuditLogPage'];
      expect(page2.items.map((r) => [r.action, r.target_id])).to.deep.equal([
        ['key.created', b.id],
        ['key.created', a.id],
      ]);
      expect(page2.next_before_id).to.equal(null);

      const filtered = (await as(admin).get(`/api/orgs/${acme}/audit-log?action=key.created`).expect(200)).body as Schemas['AuditLogPage'];
      expect(filtered.items).to.have.length(2);
      // The instance's log still has every row, the user's suspension with no organization.
      const all = (await as(root).get('/api/admin/audit-log?action=user.suspended').expect(200)).body as Schemas['AuditLogPage'];
      expect(all.items[0]!.org_id).to.equal(null);
    });

    it('a member or viewer → 403; an organization you are not in → 404, like none', async () => {
      await as(member).get(`/api/orgs/${acme}/audit-log`).expect(403);
      await as(viewer).get(`/api/orgs/${acme}/audit-log`).expect(403);
      const elsewhere = await organization('Elsewhere', [[member, 'owner']]);
      await as(admin).get(`/api/orgs/${elsewhere}/audit-log`).expect(404);
      await as(admin).get(`/api/orgs/${randomUUID()}/audit-log`).expect(404);
    });
  });

  describe('GET /api/admin/organizations and /api/admin/organizations/{org_id}', () => {
    it('lists every organization by name with its member count, personal flag and suspension; q filters, pages add up', async () => {
      await query('update organizations set suspended_at = now() where id = ?', [acme]);
      const response = await as(root).get('/api/admin/organizations?limit=200');
      expect(response.status, response.text).to.equal(200);
      const page = response.body as Schemas['AdminOrganizationPage'];
      // Five personal organizations (one per user) and Acme.
      expect(page.total).to.equal(6);
      const acmeRow = page.items.find((o) => o.org_id === acme)!;
      expect(acmeRow).to.deep.include({ name: 'Acme', personal: false, suspended: true, member_count: 4 });
      const personal = page.items.find((o) => o.org_id === member.userId)!;
      expect(personal).to.deep.include({ personal: true, suspended: false, member_count: 1 });

      const filtered = (await as(root).get('/api/admin/organizations?q=ACM').expect(200)).body as Schemas['AdminOrganizationPage'];
      expect(filtered.items.map((o) => o.org_id)).to.include(acme);
      expect(filtered.items.every((o) => o.name.toLowerCase().includes('acm'))).to.equal(true);

      const first = (await as(root).get('/api/admin/organizations?limit=4').expect(200)).body as Schemas['AdminOrganizationPage'];
      const rest = (await as(root).get('/api/admin/organizations?limit=4&offset=4').expect(200)).body as Schemas['AdminOrganizationPage'];
      expect(first.items.length + rest.items.length).to.equal(6);
      expect(rest.total).to.equal(6);
      const past = (await as(root).get('/api/admin/organizations?limit=4&offset=40').expect(200)).body as Schemas['AdminOrganizationPage'];
      expect(past).to.deep.include({ items: [], total: 6 });
    });

    it('shows one organization with its members and roles by e-mail; unknown → 404; not a super admin → 403, an organization owner included', async () => {
      const detail = (await as(root).get(`/api/admin/organizations/${acme}`).expect(200)).body as Schemas['AdminOrganizationDetail'];
      expect(detail.members.map((m) => [m.email, m.role])).to.deep.equal([
        [admin.email, 'admin'],
        [member.email, 'member'],
        [owner.email, 'owner'],
        [viewer.email, 'viewer'],
      ]);
      expect(detail.member_count).to.equal(4);
      await as(root).get(`/api/admin/organizations/${randomUUID()}`).expect(404);
      await as(owner).get(`/api/admin/organizations/${acme}`).expect(403);
      await as(owner).get('/api/admin/organizations').expect(403);
    });
  });

  describe('POST /api/admin/organizations/{org_id}/suspend and /resume', () => {
    it("suspends: its session keys → 401, its members' tokens acting in it → 403, elsewhere they still work; audited once; resume restores all", async () => {
      const key = await keyIn(member, acme, 'runner');
      await webhook(key.secret).expect(200);

      const suspended = await as(root).post(`/api/admin/organizations/${acme}/suspend`);
      expect(suspended.status, suspended.text).to.equal(200);
      expect(suspended.body).to.deep.include({ org_id: acme, suspended: true, member_count: 4 });
      const refused = await webhook(key.secret);
      expect(refused.status).to.equal(401);
      expect(refused.text).to.include('suspended');
      await as(member, acme).get('/api/v1/conversations').expect(403);
      await as(admin).get(`/api/orgs/${acme}/keys`).expect(403);
      // Their own organizations are not suspended.
      await as(member).get('/api/v1/conversations').expect(200);
      await webhook(member.sessionApiKey).expect(200);

      // Again: nothing changes, nothing more is audited.
      await as(root).post(`/api/admin/organizations/${acme}/suspend`).expect(200);
      const rows = await query<{ action: string; actor: string; org_id: string }>("select action, actor, org_id from audit_log where target_type = 'organization' order by id");
      expect(rows).to.deep.equal([{ action: 'organization.suspended', actor: root.userId, org_id: acme }]);

      const resumed = await as(root).post(`/api/admin/organizations/${acme}/resume`);
      expect(resumed.status, resumed.text).to.equal(200);
      expect(resumed.body).to.deep.include({ suspended: false });
      await webhook(key.secret).expect(200);
      await as(member, acme).get('/api/v1/conversations').expect(200);
      const after = await query<{ action: string }>("select action from audit_log where target_type = 'organization' order by id");
      expect(after.map((r) => r.action)).to.deep.equal(['organization.suspended', 'organization.resumed']);
    });

    it('unknown organization → 404; not a super admin → 403, nothing changes', async () => {
      await as(root).post(`/api/admin/organizations/${randomUUID()}/suspend`).expect(404);
      await as(root).post(`/api/admin/organizations/${randomUUID()}/resume`).expect(404);
      await as(owner).post(`/api/admin/organizations/${acme}/suspend`).expect(403);
      const [row] = await query<{ suspended_at: string | null }>('select suspended_at from organizations where id = ?', [acme]);
      expect(row!.suspended_at).to.equal(null);
    });

    it('a cached key stops within CREDENTIAL_CACHE_TTL_MS, as for a suspended user; live streams acting in a suspended organization end', async () => {
      const ttlMs = 400;
      const cached = await createTestApp({ credentialCacheTtlMs: ttlMs });
      const key = await keyIn(member, acme, 'runner');
      await postEvents(cached, key.secret, randomUUID(), [minimalEvent('PauseEvent', { id: randomUUID() })]).expect(200);
      await as(root).post(`/api/admin/organizations/${acme}/suspend`).expect(200);
      await new Promise((resolve) => setTimeout(resolve, ttlMs + 100));
      await postEvents(cached, key.secret, randomUUID(), [minimalEvent('PauseEvent', { id: randomUUID() })]).expect(401);

      // What open live streams ask every LIVE_STREAM_CREDENTIAL_CHECK_MS.
      const [row] = await query<{ id: string }>("select id from credentials where org_id = ? and kind = 'session_api_key'", [acme]);
      const [token] = await query<{ id: string }>("select id from credentials where user_id = ? and kind = 'access_token'", [member.userId]);
      const callers = [
        { credentialId: row!.id, orgId: acme },
        // An access token's stream acting in Acme ends too; the same token in the member's own organization does not.
        { credentialId: token!.id, orgId: acme },
        { credentialId: token!.id, orgId: member.orgId },
      ];
      const authenticator = new Authenticator(testDatabase().orm.em, 0);
      expect([...(await authenticator.stillValid(callers))]).to.deep.equal([`${token!.id}/${member.orgId}`]);
      await as(root).post(`/api/admin/organizations/${acme}/resume`).expect(200);
      expect([...(await authenticator.stillValid(callers))].sort()).to.deep.equal(callers.map((c) => `${c.credentialId}/${c.orgId}`).sort());
      // A member removed from the organization: their streams acting in it end as well.
      await query('delete from organization_members where org_id = ? and user_id = ?', [acme, member.userId]);
      expect([...(await authenticator.stillValid(callers))]).to.deep.equal([`${token!.id}/${member.orgId}`]);
    });
  });
});
