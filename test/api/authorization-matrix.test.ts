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
  this.timeout(120_000);

  let baseUrl: string;
  let close: () => Promise<void>;
  /** Members of organization A, by role; `outsider` owns organization B. */
  let members: Record<OrgRole, UserFixture>;
  let superAdmin: UserFixture;
  let outsider: UserFixture;
  let orgA: string;
  let orgB: string;
  /** Session API keys that act in A, made by its member and by its owner: both act as `member`. */
  let keysOfA: { madeBy: OrgRole; secret: string }[];
  let conversationId: string;
  let eventId: string;

  before(async () => {
    ({ baseUrl, close } = await listenTestApp({ rateLimits: RATE_LIMITS_OFF, credentialCacheTtlMs: 60_000 }));
  });

  after(async () => {
    await close();
  });

  beforeEach(async () => {
    const connection = testDatabase().orm.em.getConnection();
    const [owner, admin, member, viewer] = await Promise.all(ORG_ROLES.map(() => createUserFixture()));
    members = { owner: owner!, admin: admin!, member: member!, viewer: viewer! };
    [superAdmin, outsider] = await Promise.all([createUserFixture({ superAdmin: true }), createUserFixture()]);
    orgA = randomUUID();
    orgB = randomUUID();
    await connection.execute('insert into organizations (id, name) values (?, ?), (?, ?)', [orgA, 'Matrix A', orgB, 'Matrix B']);
    await connection.execute(
      'insert into organization_members (org_id, user_id, role) values (?, ?, ?), (?, ?, ?), (?, ?, ?), (?, ?, ?), (?, ?, ?)',
      [...ORG_ROLES.flatMap((role) => [orgA, members[role].userId, role]), orgB, outsider.userId, 'owner'],
    );
    keysOfA = await Promise.all((['member', 'owner'] as const).map(async (madeBy) => ({ madeBy, secret: await sessionKeyIn(members[madeBy].userId, orgA) })));
    conversationId = randomUUID();
    const event = minimalEvent('MessageEvent');
    eventId = event.id as string;
    const ingest = await fetch(`${baseUrl}/api/v1/webhooks/events/${conversationId}`, {
      method: 'POST',
      headers: { 'X-Session-API-Key': keysOfA[0]!.secret, 'Content-Type': 'application/json' },
      body: JSON.stringify([event]),
    });
    expect(ingest.status, await ingest.text()).to.equal(200);
  });

  /** A session API key of `userId` that acts in `orgId`, inserted straight into the database. */
  async function sessionKeyIn(userId: string, orgId: string): Promise<string> {
    const secret = generateSecret('session_api_key');
    rememberSecret(secret);
    await testDatabase()
      .orm.em.getConnection()
      .execute('insert into credentials (id, user_id, kind, secret_hash, org_id) values (?, ?, ?, ?, ?)', [randomUUID(), userId, 'session_api_key', hashSecret(secret), orgId]);
    return secret;
  }

  /** Path values: the organization named, real fixtures of A where an operation reads one, random ids elsewhere (a 404 still shows the check let it through). */
  function pathValues(op: SpecOperation, orgId: string): Record<string, string> {
    const values: Record<string, string> = {};
    for (const parameter of op.parameters.filter((p) => p.in === 'path')) {
      const { name, schema } = parameter;
      values[name] =
        name === 'org_id' ? orgId
        : name === 'conversation_id' ? conversationId
        : name === 'event_id' ? eventId
        : schema?.format === 'uuid' ? randomUUID()
        : schema?.type === 'integer' ? '1'
        : `matrix-${randomUUID().slice(0, 8)}`;
    }
    return values;
  }

  const orgInPath = (op: SpecOperation): boolean => op.parameters.some((p) => p.in === 'path' && p.name === 'org_id');

  /** Calls `op` acting in `orgId` (its path's `org_id`, else `X-Org-Id` unless `withoutOrgHeader`); a stream is closed once it answered. */
  async function call(op: SpecOperation, credential: Record<string, string>, orgId: string, withoutOrgHeader = false): Promise<Answer> {
    const headers: Record<string, string> = { ...credential };
    if (!orgInPath(op) && !withoutOrgHeader) headers['X-Org-Id'] = orgId;
    let body: string | undefined;
    // `{}`: the role is checked before the body is read, so what the body lacks (422) cannot hide a 403.
    if (op.hasBody) {
      body = '{}';
      headers['Content-Type'] = 'application/json';
    }
    const controller = new AbortController();
    const response = await fetch(baseUrl + fillPath(op.path, pathValues(op, orgId)), { method: op.method, headers, body, signal: controller.signal, redirect: 'manual' });
    if (op.streams && response.status === 200) {
      controller.abort();
      return { status: 200, text: '(stream opened)' };
    }
    return { status: response.status, text: (await response.text()).slice(0, 300) };
  }

  /** 403 when `allowed` is false; otherwise a documented status that is neither 403 nor a server error. */
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

  describe('what the spec declares', () => {
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

  describe('x-org-permission: the four roles, a super admin and session API keys', () => {
    for (const op of orgOperations) {
      const permission = op.orgPermission as OrgPermission;
      const schemes = schemesOf(op);
      it(`${op.method} ${op.path} (${op.operationId}, ${permission})`, async () => {
        if (schemes.includes('AccessToken')) {
          // A foreign organization first, all at once: refused, so nothing changes.
          const foreignRefusal = orgInPath(op) ? 404 : 403;
          const foreign = await Promise.all(ORG_ROLES.map((role) => call(op, { 'X-Access-Token': members[role].accessToken }, orgB)));
          ORG_ROLES.forEach((role, i) => expectDecision(op, `${role} of A in organization B`, false, foreign[i]!, foreignRefusal));
          // Then in A, least trusted first, so that what an owner may delete is deleted last.
          const callers: Caller[] = ['viewer', 'member', 'admin', 'super admin', 'owner'];
          for (const caller of callers) {
            const token = caller === 'super admin' ? superAdmin.accessToken : members[caller].accessToken;
            const answer = await call(op, { 'X-Access-Token': token }, orgA);
            expectDecision(op, `${caller} in organization A`, roleAllows(caller === 'super admin' ? 'owner' : caller, permission), answer);
          }
        }
        if (schemes.includes('APIKeyHeader')) {
          // A session API key acts as `member` of its organization, and in no other.
          const foreign = await call(op, { 'X-Session-API-Key': keysOfA[0]!.secret }, orgB);
          expectDecision(op, 'a session API key of A in organization B', false, foreign, orgInPath(op) ? 404 : 403);
          for (const key of keysOfA) {
            const answer = await call(op, { 'X-Session-API-Key': key.secret }, orgA, true);
            expectDecision(op, `a session API key of A made by its ${key.madeBy}`, roleAllows('member', permission), answer);
          }
        }
      });
    }
  });

  describe('x-permission: instance-level, super admins only', () => {
    for (const op of instanceOperations) {
      it(`${op.method} ${op.path} (${op.operationId}, ${op.permission})`, async () => {
        const credentials = schemesOf(op).includes('AccessToken') ? 'X-Access-Token' : 'X-Session-API-Key';
        const secretOf = (user: UserFixture) => (credentials === 'X-Access-Token' ? user.accessToken : user.sessionApiKey);
        // Not even an organization's owner holds an instance permission.
        const refused = await Promise.all(ORG_ROLES.map((role) => call(op, { [credentials]: secretOf(members[role]) }, orgA, true)));
        ORG_ROLES.forEach((role, i) => expectDecision(op, `${role} of A (not a super admin)`, false, refused[i]!));
        const answer = await call(op, { [credentials]: secretOf(superAdmin) }, orgA, true);
        expectDecision(op, 'a super admin', true, answer);
      });
    }
  });
});
