import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testConfig, testDatabase } from '../helpers/hooks.ts';
import { addOrganizationMember } from '../helpers/org-members.ts';
import { freePort } from '../../scripts/lib/free-port.ts';
import { secretBoxFor } from '../../src/workspaces/setup.ts';
import { PURPOSE } from '../../src/workspaces/workspace-service.ts';

const WORKSPACES = '/integration/issuetracker/workspaces';
const LINK = `${WORKSPACES}/link`;
const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

interface WorkspaceBody {
  id: number;
  name: string;
  issuetracker_cloud_id: string;
  status: string;
  editable: boolean;
  created_at: string;
  updated_at: string;
}
interface LinkBody {
  id: number;
  idp_user_id: string;
  issuetracker_workspace_id: number;
  status: string;
  created_at: string;
  updated_at: string;
  workspace: WorkspaceBody;
}

let sequence = 0;
/** A valid registration with secrets unique to this call, so a leak can be searched for. */
function registration(overrides: Record<string, unknown> = {}) {
  sequence++;
  return {
    workspace_name: `acme-${sequence}`,
    webhook_secret: `whsec_${sequence}_${Math.random().toString(36).slice(2)}`,
    svc_acc_email: `bot${sequence}@acme.example`,
    svc_acc_api_key: `ATATT_${sequence}_${Math.random().toString(36).slice(2)}`,
    is_active: true,
    ...overrides,
  };
}

async function storedWorkspace(name: string) {
  const rows = await testDatabase()
    .orm.em.getConnection()
    .execute<{ id: number; admin_user_id: string; svc_acc_email: string; webhook_secret_ciphertext: string; svc_acc_api_key_ciphertext: string; cloud_id: string; is_active: boolean }[]>(
      'select * from workspaces where name = ?',
      [name],
    );
  return rows[0];
}

describe('issue-tracker workspaces', () => {
  let client: TestApp;
  let alice: UserFixture;
  let bob: UserFixture;
  before(async () => {
    client = await createTestApp();
  });
  beforeEach(async () => {
    alice = await createUserFixture();
    bob = await createUserFixture();
  });

  const register = (body: object, token = alice.accessToken) =>
    client.request.post(WORKSPACES).set('X-Access-Token', token).send(body);
  const getLink = (token: string) => client.request.get(LINK).set('X-Access-Token', token);

  describe('POST /integration/issuetracker/workspaces', () => {
    it('returns 201 with the caller\'s active link and the new workspace, never a secret', async () => {
      const body = registration();
      const response = await register(body).expect(201);
      const link = response.body as LinkBody;
      expect(link).to.have.all.keys('id', 'idp_user_id', 'issuetracker_workspace_id', 'status', 'created_at', 'updated_at', 'workspace');
      expect(link.workspace).to.have.all.keys('id', 'name', 'issuetracker_cloud_id', 'status', 'editable', 'created_at', 'updated_at');
      expect(link).to.include({ idp_user_id: alice.userId, issuetracker_workspace_id: link.workspace.id, status: 'active' });
      expect(link.workspace).to.include({ name: body.workspace_name, status: 'active', editable: true });
      expect(link.workspace.issuetracker_cloud_id).to.match(/^[0-9a-f-]{36}$/);
      for (const time of [link.created_at, link.updated_at, link.workspace.created_at, link.workspace.updated_at]) {
        expect(time).to.match(ISO_8601);
      }
      expect(response.text).not.to.include(body.webhook_secret).and.not.to.include(body.svc_acc_api_key);
    });

    it('stores the secrets only as AES-256-GCM ciphertexts that decrypt to what was sent', async () => {
      const body = registration();
      await register(body).expect(201);
      const row = (await storedWorkspace(body.workspace_name))!;
      const everything = JSON.stringify(row);
      expect(everything).not.to.include(body.webhook_secret).and.not.to.include(body.svc_acc_api_key);
      expect(row.webhook_secret_ciphertext).to.match(/^v1:[\w-]+:[\w-]{16}:[\w-]{22}:[\w-]+$/);
      expect(row.svc_acc_api_key_ciphertext).to.match(/^v1:[\w-]+:[\w-]{16}:[\w-]{22}:[\w-]+$/);
      const box = secretBoxFor(testConfig());
      expect(box.decrypt(row.webhook_secret_ciphertext, PURPOSE.webhookSecret)).to.equal(body.webhook_secret);
      expect(box.decrypt(row.svc_acc_api_key_ciphertext, PURPOSE.svcAccApiKey)).to.equal(body.svc_acc_api_key);
      expect(row).to.include({ admin_user_id: alice.userId, svc_acc_email: body.svc_acc_email, is_active: true });
    });

    it('returns 200 and updates secrets, e-mail and status when the admin registers the name again', async () => {
      const first = registration();
      const created = (await register(first).expect(201)).body as LinkBody;
      const before = (await storedWorkspace(first.workspace_name))!;
      const again = registration({ workspace_name: first.workspace_name, is_active: false });
      const updated = (await register(again).expect(200)).body as LinkBody;
      expect(updated.id).to.equal(created.id);
      expect(updated.workspace).to.include({
        id: created.workspace.id,
        status: 'inactive',
        editable: true,
        issuetracker_cloud_id: created.workspace.issuetracker_cloud_id,
        created_at: created.workspace.created_at,
      });
      const after = (await storedWorkspace(first.workspace_name))!;
      expect(after.svc_acc_email).to.equal(again.svc_acc_email);
      expect(after.is_active).to.equal(false);
      const box = secretBoxFor(testConfig());
      expect(box.decrypt(after.webhook_secret_ciphertext, PURPOSE.webhookSecret)).to.equal(again.webhook_secret);
      expect(after.webhook_secret_ciphertext).not.to.equal(before.webhook_secret_ciphertext);
    });

    it('returns 403 when another user registers an existing name, and changes nothing', async () => {
      const body = registration();
      await register(body).expect(201);
      const before = await storedWorkspace(body.workspace_name);
      const response = await register(registration({ workspace_name: body.workspace_name }), bob.accessToken).expect(403);
      expect(response.body).to.deep.equal({ detail: 'You are not the admin of this workspace.' });
      expect(await storedWorkspace(body.workspace_name)).to.deep.equal(before);
      await getLink(bob.accessToken).expect(404);
    });

    it('returns 401 without a token or with an unknown one', async () => {
      expect((await client.request.post(WORKSPACES).send(registration()).expect(401)).body).to.deep.equal({
        detail: 'Missing X-Access-Token header',
      });
      await register(registration(), 'apat_unknown').expect(401);
    });

    it('returns 422 naming each missing field', async () => {
      for (const field of ['workspace_name', 'webhook_secret', 'svc_acc_email', 'svc_acc_api_key', 'is_active']) {
        const body: Record<string, unknown> = registration();
        delete body[field];
        const response = await register(body).expect(422);
        expect(response.body.detail).to.deep.include({ loc: ['body', field], msg: 'Field required', type: 'missing', input: redactedSecrets(body) });
      }
    });

    it('returns 422 for a bad name, e-mail, secrets or flag, without echoing a secret', async () => {
      const cases: [Record<string, unknown>, string][] = [
        [{ workspace_name: 'acme engineering' }, 'workspace_name'],
        [{ workspace_name: 'acme/../x' }, 'workspace_name'],
        [{ workspace_name: '' }, 'workspace_name'],
        [{ svc_acc_email: 'not-an-email' }, 'svc_acc_email'],
        [{ webhook_secret: 'has a space' }, 'webhook_secret'],
        [{ webhook_secret: '' }, 'webhook_secret'],
        [{ svc_acc_api_key: 'tab\there' }, 'svc_acc_api_key'],
        [{ svc_acc_api_key: 42 }, 'svc_acc_api_key'],
        [{ is_active: 'yes' }, 'is_active'],
      ];
      for (const [override, field] of cases) {
        const body = registration(override);
        const response = await register(body).expect(422);
        const errors = response.body.detail as { loc: unknown[]; input?: unknown }[];
        expect(errors.map((e) => e.loc), JSON.stringify(override)).to.deep.include(['body', field]);
        for (const secret of [body.webhook_secret, body.svc_acc_api_key]) {
          if (typeof secret === 'string' && secret !== '') expect(response.text).not.to.include(secret);
        }
        for (const error of errors) {
          if (error.loc[1] === 'webhook_secret' || error.loc[1] === 'svc_acc_api_key') expect(error.input).to.equal('[redacted]');
        }
      }
      const extra = await register({ ...registration(), extra: 1 }).expect(422);
      expect(extra.body.detail[0]).to.include({ type: 'extra_forbidden' });
    });

    it('moves the caller\'s active link to the workspace registered last', async () => {
      const first = (await register(registration()).expect(201)).body as LinkBody;
      const second = (await register(registration()).expect(201)).body as LinkBody;
      expect(((await getLink(alice.accessToken).expect(200)).body as LinkBody).id).to.equal(second.id);
      const links = await testDatabase()
        .orm.em.getConnection()
        .execute<{ id: number; is_active: boolean }[]>('select id, is_active from workspace_links where user_id = ? order by id', [alice.userId]);
      expect(links).to.deep.equal([
        { id: first.id, is_active: false },
        { id: second.id, is_active: true },
      ]);
    });

    it('lets only one of two concurrent registrations of a new name create it', async () => {
      const body = registration();
      const [a, b] = await Promise.all([register(body), register(registration({ workspace_name: body.workspace_name }), bob.accessToken)]);
      expect([a.status, b.status].sort()).to.deep.equal([201, 403]);
    });
  });

  describe('GET /integration/issuetracker/workspaces/link', () => {
    it('returns 200 with the caller\'s link, the same as registration answered', async () => {
      const created = (await register(registration()).expect(201)).body as LinkBody;
      expect((await getLink(alice.accessToken).expect(200)).body).to.deep.equal(created);
    });

    it('returns 404 {detail} when the caller has no link; another user\'s link is not theirs', async () => {
      const none = await getLink(alice.accessToken).expect(404);
      expect(none.body).to.deep.equal({ detail: 'No issue-tracker workspace is linked to your account.' });
      await register(registration()).expect(201);
      await getLink(bob.accessToken).expect(404);
    });

    it('returns 401 without a valid token', async () => {
      await client.request.get(LINK).expect(401);
      await getLink('apat_nope').expect(401);
    });
  });

  describe('linking, unlinking and deactivating', () => {
    // Bob links as a member of Alice's organization: a workspace belongs to the organization it was registered in.
    it('links a second user (a member of the organization) by name, with editable false; they cannot edit the workspace', async () => {
      const body = registration();
      const created = (await register(body).expect(201)).body as LinkBody;
      await addOrganizationMember(alice.orgId, bob.userId, 'member');
      const linked = (await client.request.post(`${WORKSPACES}/${body.workspace_name}/link`).set('X-Access-Token', bob.accessToken).set('X-Org-Id', alice.orgId).expect(200))
        .body as LinkBody;
      expect(linked).to.include({ idp_user_id: bob.userId, issuetracker_workspace_id: created.workspace.id, status: 'active' });
      expect(linked.workspace).to.include({ editable: false, name: body.workspace_name });
      expect((await getLink(bob.accessToken).set('X-Org-Id', alice.orgId).expect(200)).body).to.deep.equal(linked);
      // Alice's own view is unchanged: still editable for her.
      expect(((await getLink(alice.accessToken).expect(200)).body as LinkBody).workspace.editable).to.equal(true);

      await client.request.patch(`${WORKSPACES}/${body.workspace_name}`).set('X-Access-Token', bob.accessToken).set('X-Org-Id', alice.orgId).send({ is_active: false }).expect(403);
      await register(registration({ workspace_name: body.workspace_name }), bob.accessToken).set('X-Org-Id', alice.orgId).expect(403);
      await client.request.patch(`${WORKSPACES}/${body.workspace_name}`).set('X-Access-Token', bob.accessToken).send({ is_active: false }).expect(404);
      await register(registration({ workspace_name: body.workspace_name }), bob.accessToken).expect(403);
      expect((await storedWorkspace(body.workspace_name))!.is_active).to.equal(true);
    });

    it('answers 404 for linking to an unknown name and 409 for an inactive workspace', async () => {
      await client.request.post(`${WORKSPACES}/nowhere/link`).set('X-Access-Token', bob.accessToken).expect(404);
      const body = registration({ is_active: false });
      await register(body).expect(201);
      await addOrganizationMember(alice.orgId, bob.userId, 'member');
      const response = await client.request.post(`${WORKSPACES}/${body.workspace_name}/link`).set('X-Access-Token', bob.accessToken).set('X-Org-Id', alice.orgId).expect(409);
      expect(response.body).to.deep.equal({ detail: 'This workspace is inactive.' });
    });

    it('unlinks the caller (204), after which E5 answers 404 and unlinking again 404', async () => {
      await register(registration()).expect(201);
      await client.request.delete(LINK).set('X-Access-Token', alice.accessToken).expect(204);
      await getLink(alice.accessToken).expect(404);
      await client.request.delete(LINK).set('X-Access-Token', alice.accessToken).expect(404);
    });

    it('lets the admin deactivate and reactivate the workspace; unknown names are 404', async () => {
      const body = registration();
      await register(body).expect(201);
      const patch = (name: string, isActive: boolean) =>
        client.request.patch(`${WORKSPACES}/${name}`).set('X-Access-Token', alice.accessToken).send({ is_active: isActive });
      expect((await patch(body.workspace_name, false).expect(200)).body).to.include({ status: 'inactive', editable: true });
      expect(((await getLink(alice.accessToken).expect(200)).body as LinkBody).workspace.status).to.equal('inactive');
      expect((await patch(body.workspace_name, true).expect(200)).body).to.include({ status: 'active' });
      await patch('unknown-workspace', false).expect(404);
    });

    it('treats a workspace named "link" like any other', async () => {
      const body = registration({ workspace_name: 'link' });
      await register(body).expect(201);
      const patched = await client.request.patch(`${WORKSPACES}/link`).set('X-Access-Token', alice.accessToken).send({ is_active: false });
      expect(patched.status, patched.text).to.equal(200);
      expect(patched.body).to.include({ name: 'link', status: 'inactive' });
    });
  });

  it('never writes a secret to the log', async () => {
    const body = registration();
    await register(body).expect(201);
    await register({ ...body, svc_acc_email: 'bad' }).expect(422);
    await register(body, bob.accessToken).expect(403);
    const log = client.logs.join('');
    expect(log).to.include('request');
    expect(log).not.to.include(body.webhook_secret).and.not.to.include(body.svc_acc_api_key);
  });

  describe('with ISSUE_TRACKER_BASE_URL (a stand-in tracker on loopback)', () => {
    let tracker: http.Server;
    let trackerClient: TestApp;
    /** What the stand-in answers to `/rest/api/3/myself`; the requests it saw. */
    let myselfStatus = 200;
    let seen: { url: string; authorization: string | undefined; host: string | undefined }[] = [];
    const CLOUD_ID = 'a436116f-02ce-4520-8fbb-7301462a1674';

    before(async () => {
      tracker = http.createServer((req, res) => {
        seen.push({ url: req.url!, authorization: req.headers.authorization, host: req.headers.host });
        if (req.url === '/slow/rest/api/3/myself') return; // never answers: the client's timeout decides
        const path = req.url!.replace(/^\/[^/]+/, '');
        if (req.url!.startsWith('/unknown-site/')) {
          res.writeHead(404).end();
        } else if (path === '/rest/api/3/myself') {
          res.writeHead(myselfStatus, { 'content-type': 'application/json' }).end('{"accountId":"5b10ac8d82e05b22cc7d4ef5"}');
        } else if (path === '/_edge/tenant_info') {
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ cloudId: CLOUD_ID }));
        } else {
          res.writeHead(404).end();
        }
      });
      await new Promise<void>((resolve) => tracker.listen(0, '127.0.0.1', resolve));
      const { port } = tracker.address() as AddressInfo;
      trackerClient = await createTestApp({ issueTrackerBaseUrl: `http://127.0.0.1:${port}/{workspace}`, issueTrackerTimeoutMs: 500 });
    });
    after(async () => {
      await new Promise((resolve) => tracker.close(resolve));
    });
    beforeEach(() => {
      myselfStatus = 200;
      seen = [];
    });

    const registerVerified = (body: object) => trackerClient.request.post(WORKSPACES).set('X-Access-Token', alice.accessToken).send(body);

    it('verifies the service account with basic auth and takes the cloud id from the tenant information', async () => {
      const body = registration();
      const link = (await registerVerified(body).expect(201)).body as LinkBody;
      expect(link.workspace.issuetracker_cloud_id).to.equal(CLOUD_ID);
      const basic = `Basic ${Buffer.from(`${body.svc_acc_email}:${body.svc_acc_api_key}`).toString('base64')}`;
      expect(seen.map((r) => [r.url, r.authorization])).to.deep.equal([
        [`/${body.workspace_name}/rest/api/3/myself`, basic],
        [`/${body.workspace_name}/_edge/tenant_info`, basic],
      ]);
    });

    for (const status of [401, 403]) {
      it(`returns 422 on svc_acc_api_key when the tracker answers ${status}, and stores nothing`, async () => {
        myselfStatus = status;
        const body = registration();
        const response = await registerVerified(body).expect(422);
        expect(response.body.detail).to.have.length(1);
        expect(response.body.detail[0]).to.include({ type: 'value_error' });
        expect(response.body.detail[0].loc).to.deep.equal(['body', 'svc_acc_api_key']);
        expect(response.text).not.to.include(body.svc_acc_api_key);
        expect(await storedWorkspace(body.workspace_name)).to.equal(undefined);
      });
    }

    it('returns 422 on workspace_name when the tracker does not know the site', async () => {
      const response = await registerVerified(registration({ workspace_name: 'unknown-site' })).expect(422);
      expect(response.body.detail).to.deep.equal([
        { loc: ['body', 'workspace_name'], msg: 'The issue tracker does not know this workspace', type: 'value_error', input: 'unknown-site' },
      ]);
    });

    it('returns 503 when the tracker fails, times out or cannot be reached, and stores nothing', async () => {
      myselfStatus = 502;
      const failing = registration();
      expect((await registerVerified(failing).expect(503)).body.detail).to.match(/issue tracker/);
      const slow = registration({ workspace_name: 'slow' });
      await registerVerified(slow).expect(503);
      const unreachable = await createTestApp({ issueTrackerBaseUrl: `http://127.0.0.1:${await freePort()}`, issueTrackerTimeoutMs: 500 });
      await unreachable.request.post(WORKSPACES).set('X-Access-Token', alice.accessToken).send(registration()).expect(503);
      const count = await testDatabase().orm.em.getConnection().execute<{ n: string }[]>('select count(*)::text as n from workspaces');
      expect(count[0]!.n).to.equal('0');
    });
  });
});

function redactedSecrets(body: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(body).map(([k, v]) => [k, k === 'webhook_secret' || k === 'svc_acc_api_key' ? '[redacted]' : v]),
  );
}
