import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { minimalEvent } from '../fixtures/events.ts';
import { listenTestApp, RATE_LIMITS_OFF } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';
import { fillPath, schemesOf, specOperations, USER_SCHEMES, type SpecOperation } from '../helpers/spec-operations.ts';
import { ALL_PERMISSIONS } from '../../src/identity/authenticator.ts';
import { generateSecret, hashSecret } from '../../src/identity/secrets.ts';
import { ORG_ROLES, roleAllows, ROLE_PERMISSIONS, type OrgPermission, type OrgRole } from '../../src/organizations/roles.ts';

/**
 * The authorization matrix, derived from the spec: every operation a user's credential opens declares what it
 * needs (`x-org-permission`, checked against the caller's role in the organization it acts in, or the
 * instance-level `x-permission`), and every operation is called by every role, in its own organization and in
 * a foreign one, and must answer what src/organizations/roles.ts says: 403 exactly when the role lacks the
 * permission, otherwise a documented status that is neither 403 nor a 5xx ("let through": the permission is
 * checked before the body is read, so 404/409/422 also show that). A new operation is covered without
 * touching this file — or fails it, when it declares no permission.
 */
const operations = specOperations();
const userSecured = operations.filter((op) => schemesOf(op).some((scheme) => USER_SCHEMES.includes(scheme) || scheme === 'StreamTicket'));
const orgOperations = operations.filter((op) => op.orgPermission !== undefined);
const instanceOperations = operations.filter((op) => op.permission !== undefined);

/**
 * Operations secured only by a credential that belongs to no user (so to no organization), and why. An
 * operation with security but no permission that is not listed here fails the test.
 */
const CONFIGURATION_SECURED: Record<string, string> = {
  getMetrics: "METRICS_TOKEN, the operators' token from the configuration: no user, no organization",
};

const KNOWN_ORG_PERMISSIONS = ROLE_PERMISSIONS.owner;

/** A role of the matrix: the four of an organization, and the instance's super admin (who acts as an owner anywhere). */
type Caller = OrgRole | 'super admin';

interface Answer {
  status: number;
  text: string;
}

describe('authorization matrix: every operation × every role × own and foreign organization', function () {
  this.timeout(180_000);

  /** Operations checked at once: each has organizations of its own, so they do not disturb each other. */
  const BATCH = 4;
  let baseUrl: string;
  let close: () => Promise<void>;
  /** The people: four who take a role in each operation's organization A, a super admin, and B's owner. */
  let people: Record<OrgRole, UserFixture>;
  let superAdmin: UserFixture;
  let outsider: UserFixture;

  before(async () => {
    ({ baseUrl, close } = await listenTestApp({ rateLimits: RATE_LIMITS_OFF, credentialCacheTtlMs: 60_000 }));
  });

  after(async () => {
    await close();
  });

  beforeEach(async () => {
    const [owner, admin, member, viewer, admin2, other] = await Promise.all([
      ...ORG_ROLES.map(() => createUserFixture()),
      createUserFixture({ superAdmin: true }),
      createUserFixture(),
    ]);
    people = { owner: owner!, admin: admin!, member: member!, viewer: viewer! };
    superAdmin = admin2!;
    outsider = other!;
  });

  /** What one operation is called on: A, where `people` hold their roles, with a conversation and keys; B, foreign to them. */
  interface Organizations {
    orgA: string;
    orgB: string;
    /** Session API keys that act in A, made by its member and by its owner: both act as `member`. */
    keysOfA: { madeBy: OrgRole; secret: string }[];
    conversationId: string;
    eventId: string;
  }

  /** Fresh organizations for one operation, so what an owner deletes in one is not missing in the next. */
  async function organizations(): Promise<Organizations> {
    const connection = testDatabase().orm.em.getConnection();
    const orgA = randomUUID();
    const orgB = randomUUID();
    await connection.execute('insert into organizations (id, name) values (?, ?), (?, ?)', [orgA, 'Matrix A', orgB, 'Matrix B']);
    await connection.execute(
      'insert into organization_members (org_id, user_id, role) values (?, ?, ?), (?, ?, ?), (?, ?, ?), (?, ?, ?), (?, ?, ?)',
      [...ORG_ROLES.flatMap((role) => [orgA, people[role].userId, role]), orgB, outsider.userId, 'owner'],
    );
    const keysOfA = await Promise.all((['member', 'owner'] as const).map(async (madeBy) => ({ madeBy, secret: await sessionKeyIn(people[madeBy].userId, orgA) })));
    const conversationId = randomUUID();
    const event = minimalEvent('MessageEvent');
    const ingest = await fetch(`${baseUrl}/api/v1/webhooks/events/${conversationId}`, {
      method: 'POST',
      headers: { 'X-Session-API-Key': keysOfA[0]!.secret, 'Content-Type': 'application/json' },
      body: JSON.stringify([event]),
    });
    expect(ingest.status, await ingest.text()).to.equal(200);
    return { orgA, orgB, keysOfA, conversationId, eventId: event.id as string };
  }

  /** A session API key of `userId` that acts in `orgId`, inserted straight into the database. */
  async function sessionKeyIn(userId: string, orgId: string): Promise<string> {
    const secret = generateSecret('session_api_key');
    rememberSecret(secret);
    await testDatabase()
      .orm.em.getConnection()
      .execute('insert into credentials (id, user_id, kind, secret_hash, org_id) values (?, ?, ?, ?, ?)', [randomUUID(), userId, 'session_api_key', hashSecret(secret), orgId]);
    return secret;
  }

  /** Path values: the organization named, A's conversation where one is read, random ids elsewhere (a 404 still shows the check let it through). */
  function pathValues(op: SpecOperation, orgs: Organizations, orgId: string): Record<string, string> {
    const values: Record<string, string> = {};
    for (const { name, schema } of op.parameters.filter((p) => p.in === 'path')) {
      values[name] =
        name === 'org_id' ? orgId
        : name === 'conversation_id' ? orgs.conversationId
        : name === 'event_id' ? orgs.eventId
        : schema?.format === 'uuid' ? randomUUID()
        : schema?.type === 'integer' ? '1'
        : `matrix-${randomUUID().slice(0, 8)}`;
    }
    return values;
  }

  const orgInPath = (op: SpecOperation): boolean => op.parameters.some((p) => p.in === 'path' && p.name === 'org_id');

  /** Calls `op` acting in `orgId` (its path's `org_id`, else `X-Org-Id` unless `withoutOrgHeader`); a stream is closed once it answered. */
  async function call(op: SpecOperation, orgs: Organizations, credential: Record<string, string>, orgId: string, withoutOrgHeader = false): Promise<Answer> {
    const headers: Record<string, string> = { ...credential };
    if (!orgInPath(op) && !withoutOrgHeader) headers['X-Org-Id'] = orgId;
    let body: string | undefined;
    // `{}`: the role is checked before the body is read, so what the body lacks (422) cannot hide a 403.
    if (op.hasBody) {
      body = '{}';
      headers['Content-Type'] = 'application/json';
    }
    const controller = new AbortController();
    const url = baseUrl + fillPath(op.path, pathValues(op, orgs, orgId));
    const response = await fetch(url, { method: op.method, headers, body, signal: controller.signal, redirect: 'manual' });
    if (op.streams && response.status === 200) {
      controller.abort();
      return { status: 200, text: '(stream opened)' };
    }
    return { status: response.status, text: (await response.text()).slice(0, 300) };
  }

  /** 403 (or `refusal`) when `allowed` is false; otherwise a documented status that is neither 403 nor a server error. */
  function expectDecision(op: SpecOperation, who: string, allowed: boolean, answer: Answer, refusal = 403): void {
    const context = `${op.method} ${op.path} (${op.operationId}) as ${who}: ${answer.status} ${answer.text}`;
    if (!allowed) {
      expect(answer.status, context).to.equal(refusal);
      return;
    }
    expect(answer.status, context).to.not.equal(403);
    expect(answer.status, context).to.be.below(500);
    expect(op.statuses, `${context} — status not documented`).to.include(String(answer.status));
  }

  /**
   * Runs `check` for every operation, a few at a time, and fails once with every mismatch found (one test
   * per operation would empty and refill the database 80 times: minutes instead of seconds).
   */
  async function checkEvery(ops: SpecOperation[], check: (op: SpecOperation, orgs: Organizations) => Promise<void>): Promise<void> {
    const failures: string[] = [];
    let checked = 0;
    for (let i = 0; i < ops.length; i += BATCH) {
      await Promise.all(
        ops.slice(i, i + BATCH).map(async (op) => {
          try {
            await check(op, await organizations());
            checked++;
          } catch (error) {
            failures.push(`${op.operationId}: ${(error as Error).message}`);
          }
        }),
      );
    }
    expect(failures, `${failures.length} of ${ops.length} operations answered otherwise than their declared permission:\n${failures.join('\n')}`).to.deep.equal([]);
    expect(checked).to.equal(ops.length);
  }

  describe('what the spec declares', () => {
    it('the role table is the one issue 32 describes: each permission from the least trusted role that holds it up', () => {
      // Written out here, not read from roles.ts: the matrix derives its expectations from that table, so a
      // change to it must be a change to this list too.
      const LEAST: Record<OrgPermission, OrgRole> = {
        NONE: 'viewer',
        VIEW_ORGANIZATION: 'viewer',
        READ_CONVERSATIONS: 'viewer',
        WRITE_CONVERSATIONS: 'member',
        MANAGE_OWN_KEYS: 'member',
        USE_WORKSPACES: 'member',
        VIEW_BILLING: 'member',
        MANAGE_ORGANIZATION: 'admin',
        MANAGE_MEMBERS: 'admin',
        MANAGE_KEYS: 'admin',
        MANAGE_WEBHOOK_ENDPOINTS: 'admin',
        MANAGE_WORKSPACES: 'admin',
        MANAGE_BILLING: 'admin',
        VIEW_ORG_AUDIT_LOG: 'admin',
        MANAGE_OWNERS: 'owner',
        DELETE_ORGANIZATION: 'owner',
      };
      expect([...KNOWN_ORG_PERMISSIONS].sort()).to.deep.equal(Object.keys(LEAST).sort());
      for (const [permission, least] of Object.entries(LEAST) as [OrgPermission, OrgRole][]) {
        for (const role of ORG_ROLES) {
          const trusted = ORG_ROLES.indexOf(role) <= ORG_ROLES.indexOf(least);
          expect(roleAllows(role, permission), `${role} and ${permission}`).to.equal(trusted);
        }
      }
    });

    it('every operation a user credential opens declares x-org-permission or x-permission; the others are configuration-secured, with why', () => {
      const undeclared = userSecured.filter((op) => !op.orgPermission && !op.permission).map((op) => op.operationId);
      expect(undeclared, 'declare x-org-permission (or the instance-level x-permission) on these operations').to.deep.equal([]);
      const secured = operations.filter((op) => schemesOf(op).length > 0 && !op.orgPermission && !op.permission);
      const unexplained = secured.map((op) => op.operationId).filter((id) => !CONFIGURATION_SECURED[id]);
      expect(unexplained, 'secured operations without a permission: declare one, or list them in CONFIGURATION_SECURED').to.deep.equal([]);
      expect(orgOperations.length).to.be.greaterThan(40);
      expect(instanceOperations.length).to.be.greaterThan(10);
    });

    it('each operation declares one kind of permission, a known one, and documents 403', () => {
      for (const op of [...orgOperations, ...instanceOperations]) {
        expect(op.orgPermission && op.permission, `${op.operationId} declares both x-org-permission and x-permission`).to.not.be.ok;
        if (op.orgPermission) expect(KNOWN_ORG_PERMISSIONS.has(op.orgPermission as OrgPermission), `${op.operationId}: unknown x-org-permission ${op.orgPermission} (src/organizations/roles.ts)`).to.equal(true);
        if (op.permission) expect(ALL_PERMISSIONS, `${op.operationId}: unknown x-permission ${op.permission}`).to.include(op.permission);
        expect(op.statuses, `${op.operationId} documents no 403`).to.include('403');
      }
    });

    it('an operation acting in an organization takes it from the path (org_id) or X-Org-Id, never both, and can be called with a user credential', () => {
      for (const op of orgOperations) {
        const header = op.parameters.some((p) => p.in === 'header' && p.name.toLowerCase() === 'x-org-id');
        if (orgInPath(op)) expect(header, `${op.operationId}: its organization is in the path; drop OrgIdHeader`).to.equal(false);
        else if (schemesOf(op).includes('AccessToken')) expect(header, `${op.operationId}: add $ref: '#/components/parameters/OrgIdHeader'`).to.equal(true);
        const callable = schemesOf(op).some((scheme) => scheme === 'AccessToken' || scheme === 'APIKeyHeader');
        expect(callable, `${op.operationId}: the matrix calls with an access token or a session API key; it accepts neither`).to.equal(true);
      }
    });
  });

  it(`x-org-permission (${orgOperations.length} operations): owner, admin, member, viewer in their organization and a foreign one, a super admin, session API keys`, async () => {
    await checkEvery(orgOperations, async (op, orgs) => {
      const permission = op.orgPermission as OrgPermission;
      const schemes = schemesOf(op);
      const foreignRefusal = orgInPath(op) ? 404 : 403;
      if (schemes.includes('AccessToken')) {
        // A foreign organization first, all at once: refused, so nothing changes.
        const foreign = await Promise.all(ORG_ROLES.map((role) => call(op, orgs, { 'X-Access-Token': people[role].accessToken }, orgs.orgB)));
        ORG_ROLES.forEach((role, i) => expectDecision(op, `${role} of A in organization B`, false, foreign[i]!, foreignRefusal));
        // Then in A, least trusted first, so that what an owner may delete is deleted last.
        const callers: Caller[] = ['viewer', 'member', 'admin', 'super admin', 'owner'];
        for (const caller of callers) {
          const token = caller === 'super admin' ? superAdmin.accessToken : people[caller].accessToken;
          const answer = await call(op, orgs, { 'X-Access-Token': token }, orgs.orgA);
          expectDecision(op, `${caller} in organization A`, roleAllows(caller === 'super admin' ? 'owner' : caller, permission), answer);
        }
      }
      if (schemes.includes('APIKeyHeader')) {
        // A session API key acts as `member` of its organization, and in no other.
        const foreign = await call(op, orgs, { 'X-Session-API-Key': orgs.keysOfA[0]!.secret }, orgs.orgB);
        expectDecision(op, 'a session API key of A in organization B', false, foreign, foreignRefusal);
        for (const key of orgs.keysOfA) {
          const answer = await call(op, orgs, { 'X-Session-API-Key': key.secret }, orgs.orgA, true);
          expectDecision(op, `a session API key of A made by its ${key.madeBy}`, roleAllows('member', permission), answer);
        }
      }
    });
  });

  it(`x-permission (${instanceOperations.length} operations): instance-level, a super admin only — not even an organization's owner`, async () => {
    await checkEvery(instanceOperations, async (op, orgs) => {
      const header = schemesOf(op).includes('AccessToken') ? 'X-Access-Token' : 'X-Session-API-Key';
      const secretOf = (user: UserFixture) => (header === 'X-Access-Token' ? user.accessToken : user.sessionApiKey);
      const refused = await Promise.all(ORG_ROLES.map((role) => call(op, orgs, { [header]: secretOf(people[role]) }, orgs.orgA, true)));
      ORG_ROLES.forEach((role, i) => expectDecision(op, `${role} of A (not a super admin)`, false, refused[i]!));
      expectDecision(op, 'a super admin', true, await call(op, orgs, { [header]: secretOf(superAdmin) }, orgs.orgA, true));
    });
  });
});
