import { expect } from 'chai';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { addOrganizationMember, createOrganizationFixture } from '../helpers/org-members.ts';

const WORKSPACES = '/integration/issuetracker/workspaces';
const LINK = `${WORKSPACES}/link`;
const NOT_FOUND = { detail: 'No issue-tracker workspace has this name.' };

let sequence = 0;
function registration(overrides: Record<string, unknown> = {}) {
  sequence++;
  return {
    workspace_name: `team-space-${sequence}`,
    webhook_secret: `whsec_org_${sequence}`,
    svc_acc_email: `bot${sequence}@team.example`,
    svc_acc_api_key: `ATATT_org_${sequence}`,
    is_active: true,
    ...overrides,
  };
}

async function storedWorkspace(name: string) {
  const rows = await testDatabase()
    .orm.em.getConnection()
    .execute<{ owner_id: string; admin_user_id: string | null; is_active: boolean }[]>('select owner_id, admin_user_id, is_active from workspaces where name = ?', [name]);
  return rows[0];
}

describe('issue-tracker workspaces of an organization (X-Org-Id)', () => {
  let client: TestApp;
  let owner: UserFixture;
  let admin: UserFixture;
  let member: UserFixture;
  let viewer: UserFixture;
  let outsider: UserFixture;
  let team: string;
  before(async () => {
    client = await createTestApp();
  });
  beforeEach(async () => {
    [owner, admin, member, viewer, outsider] = (await Promise.all([1, 2, 3, 4, 5].map(() => createUserFixture()))) as [UserFixture, UserFixture, UserFixture, UserFixture, UserFixture];
    team = await createOrganizationFixture(owner.userId);
    await addOrganizationMember(team, admin.userId, 'admin');
    await addOrganizationMember(team, member.userId, 'member');
    await addOrganizationMember(team, viewer.userId, 'viewer');
  });

  /** A request of `who`, acting in `orgId` (their default organization when undefined). */
  const as = (who: UserFixture, orgId?: string) => {
    const scoped = <T extends { set(name: string, value: string): T }>(request: T) => {
      request.set('X-Access-Token', who.accessToken);
      return orgId ? request.set('X-Org-Id', orgId) : request;
    };
    return {
      register: (body: object) => scoped(client.request.post(WORKSPACES)).send(body),
      patch: (name: string, isActive: boolean) => scoped(client.request.patch(`${WORKSPACES}/${name}`)).send({ is_active: isActive }),
      link: (name: string) => scoped(client.request.post(`${WORKSPACES}/${name}/link`)),
      getLink: () => scoped(client.request.get(LINK)),
    };
  };

  describe('POST /integration/issuetracker/workspaces', () => {
    it('registers the workspace for the organization an admin acts in (owner_id), with the admin as its registrant', async () => {
      const body = registration();
      const created = await as(admin, team).register(body).expect(201);
      expect(created.body).to.deep.include({ idp_user_id: admin.userId, status: 'active' });
      expect(created.body.workspace).to.include({ name: body.workspace_name, editable: true });
      expect(await storedWorkspace(body.workspace_name)).to.deep.equal({ owner_id: team, admin_user_id: admin.userId, is_active: true });
    });

    it('lets another admin of the organization update it (200), not only the one who registered it', async () => {
      const body = registration();
      await as(admin, team).register(body).expect(201);
      const again = await as(owner, team).register({ ...body, is_active: false }).expect(200);
      expect(again.body.workspace).to.include({ status: 'inactive', editable: true });
      expect(await storedWorkspace(body.workspace_name)).to.deep.equal({ owner_id: team, admin_user_id: admin.userId, is_active: false });
    });

    it('refuses members and viewers (403), and a name another organization holds (403), changing nothing', async () => {
      const body = registration();
      await as(member, team).register(body).expect(403);
      await as(viewer, team).register(body).expect(403);
      expect(await storedWorkspace(body.workspace_name)).to.equal(undefined);
      await as(admin, team).register(body).expect(201);
      // The name is the tracker's, unique across organizations: the admin's own personal organization cannot take it.
      const taken = await as(admin).register(registration({ workspace_name: body.workspace_name })).expect(403);
      expect(taken.body).to.deep.equal({ detail: 'You are not the admin of this workspace.' });
      expect(await storedWorkspace(body.workspace_name)).to.deep.equal({ owner_id: team, admin_user_id: admin.userId, is_active: true });
    });
  });

  describe('POST /integration/issuetracker/workspaces/{workspace_name}/link', () => {
    it("lets the organization's members link to it, with editable false; a viewer is refused (403)", async () => {
      const body = registration();
      const created = await as(admin, team).register(body).expect(201);
      const linked = await as(member, team).link(body.workspace_name).expect(200);
      expect(linked.body).to.deep.include({ idp_user_id: member.userId, issuetracker_workspace_id: created.body.workspace.id, status: 'active' });
      expect(linked.body.workspace.editable).to.equal(false);
      // The link is the person's: they read it whichever organization they act in.
      expect((await as(member).getLink().expect(200)).body.issuetracker_workspace_id).to.equal(created.body.workspace.id);
      await as(viewer, team).link(body.workspace_name).expect(403);
    });

    it('answers 404, as for an unknown name, to anyone acting in another organization; 403 for an X-Org-Id they are not in', async () => {
      const body = registration();
      await as(admin, team).register(body).expect(201);
      expect((await as(outsider).link(body.workspace_name).expect(404)).body).to.deep.equal(NOT_FOUND);
      expect((await as(outsider).link('no-such-workspace').expect(404)).body).to.deep.equal(NOT_FOUND);
      // A member of the organization acting in their personal one does not see it either.
      expect((await as(member).link(body.workspace_name).expect(404)).body).to.deep.equal(NOT_FOUND);
      await as(outsider, team).link(body.workspace_name).expect(403);
      await as(outsider).getLink().expect(404);
    });
  });

  describe('PATCH /integration/issuetracker/workspaces/{workspace_name}', () => {
    it("lets the organization's admins turn it off and on; members get 403; other organizations 404", async () => {
      const body = registration();
      await as(admin, team).register(body).expect(201);
      await as(member, team).patch(body.workspace_name, false).expect(403);
      expect((await as(admin).patch(body.workspace_name, false).expect(404)).body).to.deep.equal(NOT_FOUND);
      expect((await as(outsider).patch(body.workspace_name, false).expect(404)).body).to.deep.equal(NOT_FOUND);
      expect((await storedWorkspace(body.workspace_name))!.is_active).to.equal(true);
      expect((await as(owner, team).patch(body.workspace_name, false).expect(200)).body).to.include({ status: 'inactive', editable: true });
      expect((await as(admin, team).patch(body.workspace_name, true).expect(200)).body).to.include({ status: 'active' });
    });
  });

  it('keeps the organization\'s workspace when the user who registered it is deleted', async () => {
    const body = registration();
    await as(admin, team).register(body).expect(201);
    await testDatabase().orm.em.getConnection().execute('delete from users where id = ?', [admin.userId]);
    expect(await storedWorkspace(body.workspace_name)).to.deep.equal({ owner_id: team, admin_user_id: null, is_active: true });
    expect((await as(owner, team).patch(body.workspace_name, false).expect(200)).body).to.include({ editable: true });
  });
});
