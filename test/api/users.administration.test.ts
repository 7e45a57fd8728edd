import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { createApp, type App } from '../../src/app.ts';
import { createLogger } from '../../src/logger.ts';
import { IdentityService } from '../../src/identity/identity-service.ts';
import { ConflictError } from '../../src/errors.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { openEventStream } from '../helpers/event-stream.ts';
import { createUserFixture, issueFixtureCredential, type UserFixture } from '../helpers/fixtures.ts';
import { testConfig, testDatabase } from '../helpers/hooks.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';
import { postEvents, webhookPath } from '../helpers/webhook.ts';

interface AuditRow {
  id: number;
  occurred_at: string;
  actor: string;
  action: string;
  target_type: string;
  target_id: string;
  request_id: string | null;
  summary: Record<string, unknown>;
}

function query<T>(sql: string, params: unknown[] = []): Promise<T[]> {
  return testDatabase().orm.em.getConnection().execute<T[]>(sql, params);
}

/** Every audit row, oldest first. */
const auditRows = () => query<AuditRow>('select * from audit_log order by id');
const eventCount = async (userId: string) =>
  Number(
    (await query<{ n: string }>('select count(*) as n from conversation_events e join conversations c on c.id = e.conversation_id where c.owner_id = ?', [userId]))[0]!.n,
  );

describe('administration over HTTP', function () {
  this.timeout(30_000);
  let client: TestApp;
  let admin: UserFixture;
  let member: UserFixture;

  before(async () => {
    client = await createTestApp();
  });
  beforeEach(async () => {
    admin = await createUserFixture({ email: 'root@acme.example', superAdmin: true });
    member = await createUserFixture({ email: 'ada@acme.example' });
  });

  const as = (token: string) => ({
    get: (url: string) => client.request.get(url).set('X-Access-Token', token),
    post: (url: string, body?: object) => client.request.post(url).set('X-Access-Token', token).send(body),
    delete: (url: string) => client.request.delete(url).set('X-Access-Token', token),
  });
  const webhook = (key: string, conversationId = randomUUID()) => postEvents(client, key, conversationId, [minimalEvent('PauseEvent', { id: randomUUID() })]);
  /** A key issued through the API; its secret is remembered for the secret scan. */
  const newKey = async (token: string, body: object) => {
    const response = await as(token).post('/api/keys', body);
    if (response.body.secret) rememberSecret(response.body.secret as string);
    return response;
  };

  describe('GET /api/me', () => {
    it('returns the caller’s account and permissions: none for a member, every one for a super admin', async () => {
      const mine = await as(member.accessToken).get('/api/me').expect(200);
      expect(mine.body).to.deep.include({ user_id: member.userId, email: member.email, is_super_admin: false, permissions: [], suspended: false });
      expect(Date.parse(mine.body.created_at)).to.be.closeTo(Date.now(), 60_000);
      const root = await as(admin.accessToken).get('/api/me').expect(200);
      expect(root.body.permissions).to.deep.equal(['MANAGE_SUPER_ADMINS', 'MANAGE_USERS', 'MANAGE_VERIFIED_MODELS', 'VIEW_AUDIT_LOG', 'MANAGE_REFUSED_DELIVERIES']);
    });

    it('returns 401 without an access token, and for a session API key', async () => {
      await client.request.get('/api/me').expect(401);
      await client.request.get('/api/me').set('X-Session-API-Key', member.sessionApiKey).expect(401);
    });
  });

  describe('POST /api/keys', () => {
    it('returns 201 with the secret once; an access token works, a session API key is accepted by the webhook', async () => {
      const token = await newKey(member.accessToken, { kind: 'access_token', name: '  ci  ' });
      expect(token.status, token.text).to.equal(201);
      expect(token.body).to.include({ kind: 'access_token', name: 'ci', last_used_at: null, expires_at: null });
      expect(token.body.prefix).to.equal(token.body.secret.slice(0, 8));
      await as(token.body.secret).get('/api/me').expect(200);

      const sessionKey = await newKey(member.accessToken, { kind: 'session_api_key', name: 'agent', expires_in_days: 30 });
      expect(sessionKey.status).to.equal(201);
      expect(Date.parse(sessionKey.body.expires_at) - Date.now()).to.be.closeTo(30 * 86_400_000, 60_000);
      await webhook(sessionKey.body.secret).expect(200);
    });

    it('appends key.created to the audit log, without the secret', async () => {
      const key = await newKey(member.accessToken, { kind: 'session_api_key', name: 'agent' });
      const rows = await auditRows();
      expect(rows).to.have.length(1);
      expect(rows[0]).to.include({ actor: member.userId, action: 'key.created', target_type: 'key', target_id: key.body.id, request_id: key.headers['x-request-id'] });
      expect(rows[0]!.summary).to.deep.equal({ user_id: member.userId, kind: 'session_api_key', name: 'agent', prefix: key.body.prefix, expires_at: null });
      expect(JSON.stringify(rows)).to.not.include(key.body.secret);
    });

    it('refuses (422) a key that would outlive the expiring key asking for it, and issues one that does not', async () => {
      const expiring = await newKey(member.accessToken, { kind: 'access_token', name: 'short', expires_in_days: 7 });
      const secret = expiring.body.secret as string;
      for (const body of [{ kind: 'access_token', name: 'forever' }, { kind: 'session_api_key', name: 'longer', expires_in_days: 8 }]) {
        const refused = await newKey(secret, body).then((r) => r);
        expect(refused.status, refused.text).to.equal(422);
        expect(refused.body.detail[0].loc).to.deep.equal(['body', 'expires_in_days']);
      }
      await newKey(secret, { kind: 'session_api_key', name: 'shorter', expires_in_days: 6 }).then((r) => expect(r.status).to.equal(201));
      expect((await auditRows()).filter((r) => r.action === 'key.created')).to.have.length(2);
    });

    it('returns 422 for an unknown kind, a blank name, an expiry out of range or an unknown field; nothing is issued', async () => {
      for (const body of [
        { kind: 'root', name: 'x' },
        { kind: 'access_token', name: '   ' },
        { kind: 'access_token' },
        { kind: 'access_token', name: 'x', expires_in_days: 0 },
        { kind: 'access_token', name: 'x', expires_in_days: 3651 },
        { kind: 'access_token', name: 'x', secret: 'mine' },
      ]) {
        await as(member.accessToken).post('/api/keys', body).expect(422);
      }
      expect(await auditRows()).to.deep.equal([]);
    });
  });

  describe('GET /api/keys', () => {
    it('lists the caller’s unrevoked keys, newest first, never a secret, and none of anyone else’s', async () => {
      const created = await newKey(member.accessToken, { kind: 'session_api_key', name: 'agent' });
      const response = await as(member.accessToken).get('/api/keys').expect(200);
      const keys = response.body.keys as Record<string, unknown>[];
      expect(keys).to.have.length(3); // the fixture's two and the new one
      expect(keys[0]).to.deep.include({ id: created.body.id, kind: 'session_api_key', name: 'agent', prefix: created.body.prefix });
      expect(Object.keys(keys[0]!).sort()).to.deep.equal(['created_at', 'expires_at', 'id', 'kind', 'last_used_at', 'name', 'prefix']);
      for (const secret of [member.accessToken, member.sessionApiKey, created.body.secret, admin.accessToken]) expect(response.text).to.not.include(secret);
      const adminKeys = (await as(admin.accessToken).get('/api/keys').expect(200)).body.keys as { id: string }[];
      expect(adminKeys.map((k) => k.id)).to.not.include(created.body.id);
    });

    it('shows last_used_at once a key has been used', async () => {
      const key = await newKey(member.accessToken, { kind: 'access_token', name: 'probe' });
      await as(key.body.secret).get('/api/me').expect(200);
      let listed: { id: string; last_used_at: string | null } | undefined;
      for (let i = 0; i < 50 && !listed?.last_used_at; i++) {
        listed = ((await as(member.accessToken).get('/api/keys')).body.keys as { id: string; last_used_at: string | null }[]).find((k) => k.id === key.body.id);
        if (!listed?.last_used_at) await new Promise((r) => setTimeout(r, 20));
      }
      expect(listed?.last_used_at, 'last_used_at is written off the request path, soon after').to.be.a('string');
    });
  });

  describe('DELETE /api/keys/{key_id}', () => {
    it('returns 204; the key is refused (401) from then on and leaves the list; key.revoked is audited', async () => {
      const key = await newKey(member.accessToken, { kind: 'session_api_key', name: 'agent' });
      await webhook(key.body.secret).expect(200);
      await as(member.accessToken).delete(`/api/keys/${key.body.id}`).expect(204);
      await webhook(key.body.secret).expect(401);
      const keys = (await as(member.accessToken).get('/api/keys')).body.keys as { id: string }[];
      expect(keys.map((k) => k.id)).to.not.include(key.body.id);
      const revoked = (await auditRows()).find((r) => r.action === 'key.revoked');
      expect(revoked).to.include({ actor: member.userId, target_type: 'key', target_id: key.body.id });
    });

    it('returns 404 alike for an unknown id, another user’s key and a revoked key; the other user’s key keeps working', async () => {
      const othersKey = await newKey(admin.accessToken, { kind: 'access_token', name: 'admin' });
      const mine = await newKey(member.accessToken, { kind: 'access_token', name: 'mine' });
      await as(member.accessToken).delete(`/api/keys/${mine.body.id}`).expect(204);
      const answers = await Promise.all(
        [randomUUID(), othersKey.body.id as string, mine.body.id as string].map((id) => as(member.accessToken).delete(`/api/keys/${id}`)),
      );
      expect(answers.map((a) => a.status)).to.deep.equal([404, 404, 404]);
      expect(new Set(answers.map((a) => a.body.detail)).size, 'the answers do not tell the cases apart').to.equal(1);
      await as(othersKey.body.secret).get('/api/me').expect(200);
      await as(member.accessToken).delete('/api/keys/not-a-uuid').expect(422);
    });
  });

  describe('expired keys', () => {
    it('an expired access token or session API key is refused (401) and stores nothing', async () => {
      const [token, key] = await Promise.all([issueFixtureCredential(member.userId, 'access_token'), issueFixtureCredential(member.userId, 'session_api_key')]);
      await query("update credentials set expires_at = now() - interval '1 second' where user_id = ? and secret_hash not in (select secret_hash from credentials where user_id = ? order by created_at limit 2)", [member.userId, member.userId]);
      const refused = await as(token).get('/api/me').expect(401);
      expect(refused.body.detail).to.match(/^Invalid X-Access-Token: it expired at /);
      await webhook(key).expect(401);
      expect(await eventCount(member.userId)).to.equal(0);
      await as(member.accessToken).get('/api/me').expect(200);
    });
  });

  describe('POST /api/admin/super-admins', () => {
    it('returns 201 by user_id and by e-mail (any case), 200 when already one; each grant is audited once', async () => {
      const other = await createUserFixture({ email: 'grace@acme.example' });
      const byId = await as(admin.accessToken).post('/api/admin/super-admins', { user_id: member.userId }).expect(201);
      expect(byId.body).to.deep.equal({ user_id: member.userId, email: member.email });
      await as(admin.accessToken).post('/api/admin/super-admins', { user_id: member.userId }).expect(200);
      await as(admin.accessToken).post('/api/admin/super-admins', { email: ' Grace@ACME.example ' }).expect(201);
      await as(other.accessToken).get('/api/admin/super-admins').expect(200);
      const grants = (await auditRows()).filter((r) => r.action === 'super_admin.granted');
      expect(grants.map((r) => r.target_id)).to.deep.equal([member.userId, other.userId]);
      expect(grants[0]!.actor).to.equal(admin.userId);
    });

    it('returns 404 for an unknown user, 422 for a malformed e-mail or both fields, 403 without MANAGE_SUPER_ADMINS', async () => {
      await as(admin.accessToken).post('/api/admin/super-admins', { user_id: randomUUID() }).expect(404);
      await as(admin.accessToken).post('/api/admin/super-admins', { email: 'nobody@acme.example' }).expect(404);
      const malformed = await as(admin.accessToken).post('/api/admin/super-admins', { email: 'not-an-address' }).expect(422);
      expect(malformed.body.detail[0].loc).to.deep.equal(['body', 'email']);
      await as(admin.accessToken).post('/api/admin/super-admins', { email: member.email, user_id: member.userId }).expect(422);
      await as(admin.accessToken).post('/api/admin/super-admins', {}).expect(422);
      await as(member.accessToken).post('/api/admin/super-admins', { user_id: member.userId }).expect(403);
      expect(await auditRows()).to.deep.equal([]);
    });
  });

  describe('DELETE /api/admin/super-admins/{user_id}', () => {
    it('returns 204 and takes the rights away; super_admin.revoked is audited', async () => {
      const second = await createUserFixture({ superAdmin: true });
      await as(admin.accessToken).delete(`/api/admin/super-admins/${second.userId}`).expect(204);
      await as(second.accessToken).get('/api/admin/super-admins').expect(403);
      expect((await auditRows()).map((r) => [r.action, r.target_id])).to.deep.equal([['super_admin.revoked', second.userId]]);
    });

    it('returns 409 for the last super admin, 404 for a user who is not one or does not exist', async () => {
      const last = await as(admin.accessToken).delete(`/api/admin/super-admins/${admin.userId}`).expect(409);
      expect(last.body.detail).to.match(/last super admin/);
      await as(admin.accessToken).delete(`/api/admin/super-admins/${member.userId}`).expect(404);
      await as(admin.accessToken).delete(`/api/admin/super-admins/${randomUUID()}`).expect(404);
      await as(admin.accessToken).get('/api/admin/super-admins').expect(200);
    });

    it('of two racing removals of the last two super admins, exactly one succeeds (10 rounds)', async () => {
      for (let round = 0; round < 10; round++) {
        await query('truncate audit_log');
        await query('update users set is_super_admin = false');
        const [a, b] = await Promise.all([createUserFixture({ superAdmin: true }), createUserFixture({ superAdmin: true })]);
        // Each removes themselves: whichever commits second is then the last one.
        const answers = await Promise.all([
          as(a.accessToken).delete(`/api/admin/super-admins/${a.userId}`),
          as(b.accessToken).delete(`/api/admin/super-admins/${b.userId}`),
        ]);
        expect(answers.map((r) => r.status).sort(), `round ${round}: ${answers.map((r) => r.text).join(' | ')}`).to.deep.equal([204, 409]);
        const left = await query<{ n: string }>('select count(*) as n from users where is_super_admin');
        expect(Number(left[0]!.n)).to.equal(1);
        expect((await auditRows()).filter((r) => r.action === 'super_admin.revoked')).to.have.length(1);
      }
    });
  });

  describe('users', () => {
    it('GET /api/admin/users pages users by e-mail with a case-insensitive q; 403 without MANAGE_USERS', async () => {
      await createUserFixture({ email: 'bob_smith@other.example' });
      await createUserFixture({ email: 'sam.bobxsmith@other.example' });
      const page = await as(admin.accessToken).get('/api/admin/users?limit=2').expect(200);
      expect(page.body).to.include({ total: 4, limit: 2, offset: 0 });
      expect(page.body.items.map((u: { email: string }) => u.email)).to.deep.equal(['ada@acme.example', 'bob_smith@other.example']);
      const next = await as(admin.accessToken).get('/api/admin/users?limit=2&offset=2').expect(200);
      expect(next.body.items.map((u: { email: string }) => u.email)).to.deep.equal(['root@acme.example', 'sam.bobxsmith@other.example']);
      // `_` is a literal underscore, not a wildcard.
      const found = await as(admin.accessToken).get('/api/admin/users?q=B_SMITH').expect(200);
      expect(found.body.items.map((u: { email: string }) => u.email)).to.deep.equal(['bob_smith@other.example']);
      expect(found.body.total).to.equal(1);
      expect(found.body.items[0]).to.include({ is_super_admin: false, suspended: false, active_access_tokens: 1, active_session_api_keys: 1 });
      await as(member.accessToken).get('/api/admin/users').expect(403);
      await as(admin.accessToken).get('/api/admin/users?limit=0').expect(422);
    });

    it('POST /api/admin/users returns 201 with no key; 409 for a taken e-mail in any case; 422 malformed; user.created audited', async () => {
      const created = await as(admin.accessToken).post('/api/admin/users', { email: ' Grace@Acme.Example ' }).expect(201);
      expect(created.body).to.include({ email: 'grace@acme.example', is_super_admin: false, suspended: false, active_access_tokens: 0, active_session_api_keys: 0, last_used_at: null });
      const taken = await as(admin.accessToken).post('/api/admin/users', { email: 'ADA@acme.example' }).expect(409);
      expect(taken.body.detail).to.match(/already exists/);
      const malformed = await as(admin.accessToken).post('/api/admin/users', { email: 'grace' }).expect(422);
      expect(malformed.body.detail[0].loc).to.deep.equal(['body', 'email']);
      await as(member.accessToken).post('/api/admin/users', { email: 'eve@acme.example' }).expect(403);
      const rows = await auditRows();
      expect(rows.map((r) => [r.actor, r.action, r.target_id])).to.deep.equal([[admin.userId, 'user.created', created.body.user_id]]);
      expect(rows[0]!.summary).to.deep.equal({ email: 'grace@acme.example', is_super_admin: false });
    });

    it('POST /api/admin/users/{user_id}/keys issues a working first key; 404 unknown user; 409 suspended user', async () => {
      const created = await as(admin.accessToken).post('/api/admin/users', { email: 'grace@acme.example' }).expect(201);
      const key = await as(admin.accessToken).post(`/api/admin/users/${created.body.user_id}/keys`, { kind: 'access_token', name: 'first' }).expect(201);
      rememberSecret(key.body.secret);
      const me = await as(key.body.secret).get('/api/me').expect(200);
      expect(me.body.email).to.equal('grace@acme.example');
      await as(admin.accessToken).post(`/api/admin/users/${randomUUID()}/keys`, { kind: 'access_token', name: 'x' }).expect(404);
      // An expiring admin token cannot issue a key that outlives it, to anyone.
      const expiring = await newKey(admin.accessToken, { kind: 'access_token', name: 'short', expires_in_days: 1 });
      await as(expiring.body.secret).post(`/api/admin/users/${created.body.user_id}/keys`, { kind: 'access_token', name: 'y' }).expect(422);
      await as(admin.accessToken).post(`/api/admin/users/${member.userId}/suspend`).expect(200);
      await as(admin.accessToken).post(`/api/admin/users/${member.userId}/keys`, { kind: 'access_token', name: 'x' }).expect(409);
      const keyRows = (await auditRows()).filter((r) => r.action === 'key.created');
      expect(keyRows.map((r) => [r.actor, r.summary.user_id])).to.deep.equal([
        [admin.userId, created.body.user_id],
        [admin.userId, admin.userId],
      ]);
    });

    it('suspend: every credential is refused (REST, webhook: nothing stored); the data stays; resume restores them', async () => {
      const conversationId = randomUUID();
      await webhook(member.sessionApiKey, conversationId).expect(200);
      const suspended = await as(admin.accessToken).post(`/api/admin/users/${member.userId}/suspend`).expect(200);
      expect(suspended.body).to.include({ user_id: member.userId, suspended: true });

      const refused = await as(member.accessToken).get('/api/me').expect(401);
      expect(refused.body.detail).to.equal('Invalid X-Access-Token: the account is suspended');
      const delivery = await webhook(member.sessionApiKey, conversationId).expect(401);
      expect(delivery.body.detail).to.equal('Invalid X-Session-API-Key: the account is suspended');
      await webhook(member.sessionApiKey).expect(401);
      expect(await eventCount(member.userId), 'nothing stored while suspended').to.equal(1);
      // Suspending again changes nothing and is not audited again.
      await as(admin.accessToken).post(`/api/admin/users/${member.userId}/suspend`).expect(200);

      const resumed = await as(admin.accessToken).post(`/api/admin/users/${member.userId}/resume`).expect(200);
      expect(resumed.body.suspended).to.equal(false);
      const conversation = await as(member.accessToken).get(`/api/v1/conversations/${conversationId}`).expect(200);
      expect(conversation.body.event_count).to.equal(1);
      await webhook(member.sessionApiKey, conversationId).expect(200);
      expect((await auditRows()).map((r) => r.action)).to.deep.equal(['user.suspended', 'user.resumed']);
    });

    it('a super admin cannot suspend themselves (409); the last super admin cannot be suspended (409, the CLI path)', async () => {
      const self = await as(admin.accessToken).post(`/api/admin/users/${admin.userId}/suspend`).expect(409);
      expect(self.body.detail).to.equal('You cannot suspend yourself');
      const identity = new IdentityService(testDatabase().orm.em);
      let error: unknown;
      await identity.suspendUser('cli:test', { email: admin.email }).catch((e: unknown) => (error = e));
      expect(error).to.be.instanceOf(ConflictError);
      expect((error as Error).message).to.match(/last super admin/);
      // With a second super admin, the first can be suspended by them.
      const second = await createUserFixture({ superAdmin: true });
      await as(second.accessToken).post(`/api/admin/users/${admin.userId}/suspend`).expect(200);
      // Now `second` is the last active one: a suspended admin does not count.
      await identity.suspendUser('cli:test', { userId: second.userId }).then(
        () => expect.fail('suspended the last active super admin'),
        (e: unknown) => expect(e).to.be.instanceOf(ConflictError),
      );
      await as(second.accessToken).post(`/api/admin/users/${randomUUID()}/suspend`).expect(404);
      await as(second.accessToken).post(`/api/admin/users/${randomUUID()}/resume`).expect(404);
      await as(member.accessToken).post(`/api/admin/users/${admin.userId}/resume`).expect(403);
    });
  });

  describe('GET /api/admin/audit-log', () => {
    it('lists rows newest first with their request id, filtered by actor, action, target and time, page by page', async () => {
      const created = await as(admin.accessToken).post('/api/admin/users', { email: 'grace@acme.example' });
      await as(admin.accessToken).post(`/api/admin/users/${member.userId}/suspend`);
      await as(admin.accessToken).post(`/api/admin/users/${member.userId}/resume`);
      await newKey(admin.accessToken, { kind: 'access_token', name: 'x' });

      const all = await as(admin.accessToken).get('/api/admin/audit-log').expect(200);
      expect(all.body.items.map((r: AuditRow) => r.action)).to.deep.equal(['key.created', 'user.resumed', 'user.suspended', 'user.created']);
      expect(all.body.items[3]).to.include({ actor: admin.userId, target_type: 'user', target_id: created.body.user_id, request_id: created.headers['x-request-id'] });
      expect(all.body.next_before_id).to.equal(null);

      const first = await as(admin.accessToken).get('/api/admin/audit-log?limit=3').expect(200);
      expect(first.body.items).to.have.length(3);
      const second = await as(admin.accessToken).get(`/api/admin/audit-log?limit=3&before_id=${first.body.next_before_id}`).expect(200);
      expect(second.body.items.map((r: AuditRow) => r.action)).to.deep.equal(['user.created']);
      expect(second.body.next_before_id).to.equal(null);

      const byTarget = await as(admin.accessToken).get(`/api/admin/audit-log?target_type=user&target_id=${member.userId}`).expect(200);
      expect(byTarget.body.items.map((r: AuditRow) => r.action)).to.deep.equal(['user.resumed', 'user.suspended']);
      const byAction = await as(admin.accessToken).get('/api/admin/audit-log?action=user.suspended').expect(200);
      expect(byAction.body.items).to.have.length(1);
      const byActor = await as(admin.accessToken).get(`/api/admin/audit-log?actor=${member.userId}`).expect(200);
      expect(byActor.body.items).to.deep.equal([]);
      const future = new Date(Date.now() + 60_000).toISOString();
      const past = new Date(Date.now() - 60_000).toISOString();
      expect((await as(admin.accessToken).get(`/api/admin/audit-log?since=${encodeURIComponent(future)}`)).body.items).to.deep.equal([]);
      expect((await as(admin.accessToken).get(`/api/admin/audit-log?until=${encodeURIComponent(past)}`)).body.items).to.deep.equal([]);
      expect((await as(admin.accessToken).get(`/api/admin/audit-log?since=${encodeURIComponent(past)}&until=${encodeURIComponent(future)}`)).body.items).to.have.length(4);
    });

    it('names the people of the page by e-mail (actors and user targets), not CLI or system actors', async () => {
      await as(admin.accessToken).post(`/api/admin/users/${member.userId}/suspend`);
      const page = await as(admin.accessToken).get('/api/admin/audit-log?action=user.suspended').expect(200);
      expect(page.body.people).to.deep.equal({ [admin.userId]: admin.email, [member.userId]: member.email });
      const none = await as(admin.accessToken).get('/api/admin/audit-log?action=nothing.happened').expect(200);
      expect(none.body.people).to.deep.equal({});
    });

    it('returns 403 without VIEW_AUDIT_LOG, 422 for a bad filter', async () => {
      await as(member.accessToken).get('/api/admin/audit-log').expect(403);
      await as(admin.accessToken).get('/api/admin/audit-log?since=yesterday').expect(422);
      await as(admin.accessToken).get('/api/admin/audit-log?limit=201').expect(422);
      await as(admin.accessToken).get('/api/admin/audit-log?before_id=0').expect(422);
    });
  });

  describe('the audit table is append-only', () => {
    it('UPDATE and DELETE of audit rows fail in the database; the rows stay as written', async () => {
      await as(admin.accessToken).post('/api/admin/users', { email: 'grace@acme.example' }).expect(201);
      const before = await auditRows();
      for (const sql of ["update audit_log set actor = 'someone else'", 'delete from audit_log', 'delete from audit_log where id = (select min(id) from audit_log)']) {
        let error: unknown;
        await query(sql).catch((e: unknown) => (error = e));
        expect((error as Error | undefined)?.message, sql).to.match(/audit_log is append-only/);
      }
      expect(await auditRows()).to.deep.equal(before);
    });
  });

  describe('every kind of change leaves its audit row', () => {
    it('verified models: created, updated, deleted', async () => {
      const model = await as(admin.accessToken).post('/api/admin/verified-models', { model_name: 'o3', provider: 'openai' }).expect(201);
      await client.request.patch(`/api/admin/verified-models/${model.body.id}`).set('X-Access-Token', admin.accessToken).send({ is_enabled: false }).expect(200);
      await as(admin.accessToken).delete(`/api/admin/verified-models/${model.body.id}`).expect(204);
      const rows = await auditRows();
      expect(rows.map((r) => [r.actor, r.action, r.target_type, r.target_id])).to.deep.equal([
        [admin.userId, 'verified_model.created', 'verified_model', String(model.body.id)],
        [admin.userId, 'verified_model.updated', 'verified_model', String(model.body.id)],
        [admin.userId, 'verified_model.deleted', 'verified_model', String(model.body.id)],
      ]);
      expect(rows[1]!.summary).to.deep.equal({ provider: 'openai', model_name: 'o3', is_enabled: false });
    });

    it('workspaces: registered, linked, deactivated, activated, unlinked — never a secret', async () => {
      const secret = `whsec_${randomUUID()}`;
      const apiKey = `ATATT_${randomUUID()}`;
      const body = { workspace_name: 'acme', webhook_secret: secret, svc_acc_email: 'bot@acme.example', svc_acc_api_key: apiKey, is_active: true };
      await as(member.accessToken).post('/integration/issuetracker/workspaces', body).expect(201);
      const patch = (isActive: boolean) =>
        client.request.patch('/integration/issuetracker/workspaces/acme').set('X-Access-Token', member.accessToken).send({ is_active: isActive }).expect(200);
      await patch(false);
      await patch(true);
      await as(member.accessToken).delete('/integration/issuetracker/workspaces/link').expect(204);
      // The workspace is the member's organization's: the super admin links acting there (as an owner).
      await as(admin.accessToken).post('/integration/issuetracker/workspaces/acme/link').set('X-Org-Id', member.orgId).expect((r) => expect(r.status).to.be.oneOf([200, 201]));
      const rows = await auditRows();
      expect(rows.map((r) => [r.action, r.actor])).to.deep.equal([
        ['workspace.registered', member.userId],
        ['workspace.linked', member.userId],
        ['workspace.deactivated', member.userId],
        ['workspace.activated', member.userId],
        ['workspace.unlinked', member.userId],
        ['workspace.linked', admin.userId],
      ]);
      expect(JSON.stringify(rows)).to.not.include(secret).and.not.include(apiKey);
    });

    it('billing: a completed checkout, once, by system:local-checkout', async () => {
      const started = await as(member.accessToken).post('/api/billing/create-checkout-session', { amount: 25 }).expect(200);
      const id = new URL(started.body.redirect_url as string).pathname.split('/').pop()!;
      await client.request.post(`/billing/checkout/${id}/confirm`).type('form').send('').expect(303);
      await client.request.post(`/billing/checkout/${id}/confirm`).type('form').send('').expect(303);
      const rows = await auditRows();
      expect(rows.map((r) => [r.actor, r.action, r.target_type, r.target_id])).to.deep.equal([
        ['system:local-checkout', 'checkout_session.completed', 'checkout_session', id],
      ]);
      expect(rows[0]!.summary).to.deep.equal({ owner_id: member.userId, amount_usd: 25, provider: 'local' });
    });
  });
});

describe('suspension and revocation with a credential cache and open live streams', function () {
  this.timeout(30_000);
  const CACHE_TTL_MS = 600;
  const CHECK_MS = 150;
  let server: http.Server;
  let baseUrl: string;
  let app: App;

  before(async () => {
    const database = testDatabase();
    app = await createApp({
      config: { ...testConfig(), credentialCacheTtlMs: CACHE_TTL_MS, liveStreamCredentialCheckMs: CHECK_MS },
      logger: createLogger('silent'),
      orm: database.orm,
      database,
    });
    server = http.createServer(app.app.callback());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    await app.liveStreams.close();
    await new Promise((resolve) => server.close(resolve));
  });

  const post = (key: string, conversationId: string) =>
    fetch(`${baseUrl}${webhookPath(conversationId)}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Session-API-Key': key },
      body: JSON.stringify([minimalEvent('PauseEvent', { id: randomUUID() })]),
    });

  it('a suspended user’s webhook deliveries are refused within the cache TTL and store nothing; their open live stream ends', async () => {
    const admin = await createUserFixture({ superAdmin: true });
    const user = await createUserFixture();
    const conversationId = randomUUID();
    expect((await post(user.sessionApiKey, conversationId)).status).to.equal(200);
    const stream = await openEventStream(`${baseUrl}/api/v1/conversations/${conversationId}/events/stream`, { 'X-Access-Token': user.accessToken });
    expect(stream.status).to.equal(200);
    expect(await stream.until((m) => m.some((x) => x.event === 'event'))).to.equal(true);

    const suspendedAt = Date.now();
    const suspended = await fetch(`${baseUrl}/api/admin/users/${user.userId}/suspend`, { method: 'POST', headers: { 'X-Access-Token': admin.accessToken } });
    expect(suspended.status).to.equal(200);

    // The stream ends with a final `error` event saying why, within the check interval.
    await stream.ended;
    const endedAfter = Date.now() - suspendedAt;
    const last = stream.parser.messages.at(-1)!;
    expect(last.event).to.equal('error');
    expect(JSON.parse(last.data)).to.include({ reason: 'credential_revoked' });
    expect(endedAfter).to.be.below(CACHE_TTL_MS + 1_000);
    console.log(`      live stream of the suspended user ended ${endedAfter} ms after the suspension (check every ${CHECK_MS} ms)`);

    // Deliveries: maybe still accepted from the cache, refused once the TTL has passed.
    await new Promise((r) => setTimeout(r, CACHE_TTL_MS + 50));
    const countBefore = await eventCount(user.userId);
    const refused = await post(user.sessionApiKey, conversationId);
    expect(refused.status).to.equal(401);
    expect(await eventCount(user.userId)).to.equal(countBefore);
    // A new stream is refused too.
    const again = await openEventStream(`${baseUrl}/api/v1/conversations/${conversationId}/events/stream`, { 'X-Access-Token': user.accessToken });
    expect(again.status).to.equal(401);
  });

  it('a revoked key’s open live stream ends; another key’s stream of the same user stays open', async () => {
    const user = await createUserFixture();
    const conversationId = randomUUID();
    expect((await post(user.sessionApiKey, conversationId)).status).to.equal(200);
    const created = await fetch(`${baseUrl}/api/keys`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Access-Token': user.accessToken },
      body: JSON.stringify({ kind: 'access_token', name: 'viewer' }),
    });
    const key = (await created.json()) as { id: string; secret: string };
    rememberSecret(key.secret);
    const url = `${baseUrl}/api/v1/conversations/${conversationId}/events/stream`;
    const [doomed, kept] = await Promise.all([openEventStream(url, { 'X-Access-Token': key.secret }), openEventStream(url, { 'X-Access-Token': user.accessToken })]);
    expect([doomed.status, kept.status]).to.deep.equal([200, 200]);
    const revoked = await fetch(`${baseUrl}/api/keys/${key.id}`, { method: 'DELETE', headers: { 'X-Access-Token': user.accessToken } });
    expect(revoked.status).to.equal(204);
    await doomed.ended;
    expect(JSON.parse(doomed.parser.messages.at(-1)!.data)).to.include({ reason: 'credential_revoked' });
    await new Promise((r) => setTimeout(r, CHECK_MS * 3));
    expect(await kept.until((m) => m.length > 0, 100)).to.equal(true);
    expect(kept.response.complete, 'the other stream is still open').to.equal(false);
    kept.close();
  });
});
