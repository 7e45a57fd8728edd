import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { DeliveryWorker } from '../../src/outbound/delivery-worker.ts';
import { generateSecret, hashSecret } from '../../src/identity/secrets.ts';
import { spendMonthsBackfill } from '../../src/db/migrations/Migration20261127221000_budgets.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { outboundApp, Receiver, verifyDelivery, type OutboundApp } from '../helpers/outbound.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';
import { waitFor } from '../helpers/server-process.ts';

const sql = <T = Record<string, unknown>>(text: string, params: unknown[] = []) => testDatabase().orm.em.getConnection().execute<T[]>(text, params);

/** A member of the team organization: an access token (acting there with X-Org-Id) and a session API key of the organization. */
interface TeamMember extends UserFixture {
  teamKey: string;
}

/** The month (UTC) as the API names it. */
const thisMonth = () => new Date().toISOString().slice(0, 7);

describe('budgets', function () {
  this.timeout(60_000);

  let app: OutboundApp;
  let worker: DeliveryWorker | undefined;
  let orgId: string;
  let owner: TeamMember;
  let member: TeamMember;
  let viewer: TeamMember;
  let stranger: UserFixture;

  before(async () => {
    app = await outboundApp();
  });

  /** A user in the organization with `role`, with a session API key made in it. */
  async function joinTeam(role: 'owner' | 'admin' | 'member' | 'viewer', email: string): Promise<TeamMember> {
    const user = await createUserFixture({ email });
    await sql('insert into organization_members (org_id, user_id, role) values (?, ?, ?)', [orgId, user.userId, role]);
    const teamKey = generateSecret('session_api_key');
    rememberSecret(teamKey);
    await sql('insert into credentials (id, user_id, kind, secret_hash, org_id) values (?, ?, ?, ?, ?)', [randomUUID(), user.userId, 'session_api_key', hashSecret(teamKey), orgId]);
    return { ...user, teamKey };
  }

  beforeEach(async () => {
    orgId = randomUUID();
    await sql('insert into organizations (id, name) values (?, ?)', [orgId, 'Team']);
    owner = await joinTeam('owner', `owner-${orgId.slice(0, 8)}@example.com`);
    member = await joinTeam('member', `member-${orgId.slice(0, 8)}@example.com`);
    viewer = await joinTeam('viewer', `viewer-${orgId.slice(0, 8)}@example.com`);
    stranger = await createUserFixture();
  });

  afterEach(async () => {
    await worker?.stop(1_000);
    worker = undefined;
  });

  const as = (who: UserFixture) => ({ 'X-Access-Token': who.accessToken });
  const budgetPath = (id = orgId) => `/api/orgs/${id}/budget`;
  const getBudget = (who: UserFixture, id = orgId) => app.request.get(budgetPath(id)).set(as(who));
  const putBudget = (who: UserFixture, body: unknown, id = orgId) => app.request.put(budgetPath(id)).set(as(who)).send(body as object);

  /** Posts a conversation info as the agent-server does: one usage whose cumulative cost is `cost` dollars. */
  async function report(key: string, conversationId: string, cost: number | string, second = 1): Promise<void> {
    const body = `{"id":"${conversationId}","updated_at":"${new Date(Date.UTC(2026, 10, 23, 18, 0, second)).toISOString()}",` +
      `"stats":{"usage_to_metrics":{"agent":{"model_name":"anthropic/claude-sonnet-4-5","accumulated_cost":${cost}}}}}`;
    const response = await app.request.post('/api/v1/webhooks/conversations').set('X-Session-API-Key', key).set('Content-Type', 'application/json').send(body);
    expect(response.status, JSON.stringify(response.body)).to.be.oneOf([200, 201]);
  }

  describe('GET /api/orgs/{org_id}/budget', () => {
    it('returns no limits, the default thresholds and every member at zero before anything is set or spent', async () => {
      const { body } = await getBudget(owner).expect(200);
      expect(body).to.deep.include({
        org_id: orgId,
        month: thisMonth(),
        monthly_limit_usd: null,
        monthly_limit_micro_usd: null,
        member_monthly_limit_usd: null,
        member_monthly_limit_micro_usd: null,
        alert_thresholds: [50, 80, 100],
        spend_usd: 0,
        spend_micro_usd: 0,
        alerts: [],
        allowed: true,
        reason: null,
        editable: true,
      });
      expect(body.members.map((m: { email: string }) => m.email).sort()).to.deep.equal([owner.email, member.email, viewer.email].sort());
      expect(body.members.every((m: { spend_micro_usd: number }) => m.spend_micro_usd === 0)).to.equal(true);
    });

    it('is readable by a viewer and by a session API key of the organization, not editable by either', async () => {
      expect((await getBudget(viewer).expect(200)).body.editable).to.equal(false);
      const byKey = await app.request.get(budgetPath()).set('X-Session-API-Key', member.teamKey).expect(200);
      expect(byKey.body).to.include({ org_id: orgId, allowed: true, editable: false });
    });

    it('returns 404 for an organization the caller is not in, for one that does not exist, and for a key of another organization', async () => {
      expect((await getBudget(stranger).expect(404)).body.detail).to.equal('Organization not found');
      await getBudget(owner, randomUUID()).expect(404);
      await app.request.get(budgetPath()).set('X-Session-API-Key', stranger.sessionApiKey).expect(404);
      await putBudget(stranger, { alert_thresholds: [50] }).expect(404);
    });

    it('returns 401 without a credential', async () => {
      await app.request.get(budgetPath()).expect(401);
    });
  });

  describe('PUT /api/orgs/{org_id}/budget', () => {
    it('stores the limits (exact to the micro-dollar) and thresholds, audited, and GET shows them', async () => {
      const response = await app.request
        .put(budgetPath())
        .set(as(owner))
        .set('Content-Type', 'application/json')
        .send('{"monthly_limit_usd": 1234.567891, "member_monthly_limit_usd": 0.1, "alert_thresholds": [25, 90, 150]}')
        .expect(200);
      expect(response.body).to.deep.include({
        monthly_limit_usd: 1234.567891,
        monthly_limit_micro_usd: 1_234_567_891,
        member_monthly_limit_usd: 0.1,
        member_monthly_limit_micro_usd: 100_000,
        alert_thresholds: [25, 90, 150],
        editable: true,
      });
      expect((await getBudget(member).expect(200)).body).to.deep.include({ monthly_limit_micro_usd: 1_234_567_891, alert_thresholds: [25, 90, 150], editable: false });
      const [audit] = await sql<{ actor: string; action: string; target_id: string }>(`select actor, action, target_id from audit_log where action = 'budget.updated'`);
      expect(audit).to.deep.equal({ actor: owner.userId, action: 'budget.updated', target_id: orgId });
    });

    it('replaces the budget: an absent or null limit is no limit', async () => {
      await putBudget(owner, { monthly_limit_usd: 10, member_monthly_limit_usd: 5, alert_thresholds: [50] }).expect(200);
      const { body } = await putBudget(owner, { member_monthly_limit_usd: null, alert_thresholds: [] }).expect(200);
      expect(body).to.deep.include({ monthly_limit_usd: null, member_monthly_limit_usd: null, alert_thresholds: [] });
    });

    it('returns 403 to a member and a viewer, changing nothing', async () => {
      for (const who of [member, viewer]) {
        const response = await putBudget(who, { monthly_limit_usd: 1, alert_thresholds: [50] }).expect(403);
        expect(response.body.detail).to.include('MANAGE_BILLING');
      }
      expect((await getBudget(owner).expect(200)).body.monthly_limit_usd).to.equal(null);
    });

    for (const [label, body, loc] of [
      ['a monthly limit below zero', { monthly_limit_usd: -1, alert_thresholds: [50] }, ['body', 'monthly_limit_usd']],
      ['a member limit below zero', { member_monthly_limit_usd: -0.01, alert_thresholds: [50] }, ['body', 'member_monthly_limit_usd']],
      ['a threshold of 0', { alert_thresholds: [0, 50] }, ['body', 'alert_thresholds', 0]],
      ['a threshold above 1000', { alert_thresholds: [50, 1001] }, ['body', 'alert_thresholds', 1]],
      ['thresholds not ascending', { alert_thresholds: [80, 50] }, ['body', 'alert_thresholds']],
      ['a repeated threshold', { alert_thresholds: [50, 50] }, ['body', 'alert_thresholds']],
      ['no thresholds', { monthly_limit_usd: 5 }, ['body', 'alert_thresholds']],
    ] as const) {
      it(`returns 422 naming the field for ${label}, changing nothing`, async () => {
        await putBudget(owner, { monthly_limit_usd: 7, alert_thresholds: [60] }).expect(200);
        const response = await putBudget(owner, body).expect(422);
        expect(response.body.detail.map((d: { loc: unknown[] }) => d.loc), JSON.stringify(response.body)).to.deep.include(loc);
        expect((await getBudget(owner).expect(200)).body).to.deep.include({ monthly_limit_usd: 7, member_monthly_limit_usd: null, alert_thresholds: [60] });
      });
    }
  });

  describe('spend per member', () => {
    it('charges each conversation info to the member whose key posted it: the budget, getSpend by member and its member_id filter', async () => {
      await report(owner.teamKey, randomUUID(), 1.5);
      await report(member.teamKey, randomUUID(), '0.25');
      await report(member.teamKey, randomUUID(), 0.000001);
      const { body } = await getBudget(viewer).expect(200);
      expect(body.spend_micro_usd).to.equal(1_750_001);
      expect(body.members).to.deep.equal([
        { user_id: owner.userId, email: owner.email, spend_usd: 1.5, spend_micro_usd: 1_500_000 },
        { user_id: member.userId, email: member.email, spend_usd: 0.250001, spend_micro_usd: 250_001 },
        { user_id: viewer.userId, email: viewer.email, spend_usd: 0, spend_micro_usd: 0 },
      ]);

      const inTeam = { ...as(owner), 'X-Org-Id': orgId };
      const byMember = await app.request.get('/api/billing/spend?group_by=member').set(inTeam).expect(200);
      expect(byMember.body).to.include({ group_by: 'member', total_micro_usd: 1_750_001, group_count: 2 });
      expect(byMember.body.items.map((row: { member_id: string; email: string; amount_micro_usd: number; entry_count: number }) => [row.member_id, row.email, row.amount_micro_usd, row.entry_count])).to.deep.equal([
        [owner.userId, owner.email, 1_500_000, 1],
        [member.userId, member.email, 250_001, 2],
      ]);
      const onlyMember = await app.request.get(`/api/billing/spend?group_by=model&member_id=${member.userId}`).set(inTeam).expect(200);
      expect(onlyMember.body).to.include({ total_micro_usd: 250_001, entry_count: 2 });
      // The personal organization's ledger is its own.
      expect((await app.request.get('/api/billing/spend').set(as(owner)).expect(200)).body.total_micro_usd).to.equal(0);
    });

    it('counts the ledger as it stood before budgets in the month\'s spend (the migration\'s backfill), without members', async () => {
      await report(owner.teamKey, randomUUID(), 2);
      await report(member.teamKey, randomUUID(), 0.5);
      // As before the migration: no member on the charges, one of them last month, no monthly totals.
      await sql(`update spend_entries set member_id = null`);
      await sql(`update spend_entries set charged_at = now() - interval '40 days' where amount_micro_usd = 500000`);
      await sql('delete from spend_member_months');
      await sql('delete from spend_months');
      await sql(spendMonthsBackfill());
      const { body } = await getBudget(owner).expect(200);
      expect(body.spend_micro_usd).to.equal(2_000_000);
      expect(body.members.every((m: { spend_micro_usd: number }) => m.spend_micro_usd === 0)).to.equal(true);
      await report(member.teamKey, randomUUID(), 0.25);
      expect((await getBudget(owner).expect(200)).body.spend_micro_usd).to.equal(2_250_000);
    });

    it('groups charges made before members were recorded under a null member', async () => {
      await report(owner.teamKey, randomUUID(), 2);
      await sql('update spend_entries set member_id = null');
      const { body } = await app.request.get('/api/billing/spend?group_by=member').set({ ...as(owner), 'X-Org-Id': orgId }).expect(200);
      expect(body.items.map((row: { member_id: string | null; email: string | null; amount_micro_usd: number }) => [row.member_id, row.email, row.amount_micro_usd])).to.deep.equal([[null, null, 2_000_000]]);
    });
  });

  describe('allowed and reason', () => {
    it('says no, in words, once the caller\'s member limit or the organization\'s limit is reached, and events keep being accepted', async () => {
      await putBudget(owner, { monthly_limit_usd: 1, member_monthly_limit_usd: 0.5, alert_thresholds: [50, 80, 100] }).expect(200);
      const conversation = randomUUID();
      await report(member.teamKey, conversation, 0.6);

      const forMember = (await app.request.get(budgetPath()).set('X-Session-API-Key', member.teamKey).expect(200)).body;
      expect(forMember.allowed).to.equal(false);
      expect(forMember.reason).to.equal(`Your monthly budget in this organization is used up: $0.60 spent of $0.50 in ${thisMonth()}.`);
      expect(forMember.alerts).to.deep.equal([
        { scope: 'organization', user_id: null, percent: 50, spend_usd: 0.6, spend_micro_usd: 600_000, limit_usd: 1, limit_micro_usd: 1_000_000 },
        { scope: 'member', user_id: member.userId, percent: 100, spend_usd: 0.6, spend_micro_usd: 600_000, limit_usd: 0.5, limit_micro_usd: 500_000 },
      ]);
      expect((await app.request.get(budgetPath()).set('X-Session-API-Key', owner.teamKey).expect(200)).body).to.include({ allowed: true, reason: null });

      // Past every limit, what the runtime sends is still stored and charged.
      await report(owner.teamKey, randomUUID(), 0.45);
      await report(member.teamKey, conversation, 0.9, 2);
      const forOwner = (await getBudget(owner).expect(200)).body;
      expect(forOwner.spend_micro_usd).to.equal(1_350_000);
      expect(forOwner.allowed).to.equal(false);
      expect(forOwner.reason).to.equal(`The organization's monthly budget is used up: $1.35 spent of $1.00 in ${thisMonth()}.`);
    });

    it('allows nothing under a limit of 0', async () => {
      await putBudget(owner, { monthly_limit_usd: 0, alert_thresholds: [100] }).expect(200);
      const { body } = await getBudget(member).expect(200);
      expect(body).to.include({ allowed: false });
      expect(body.reason).to.match(/^The organization's monthly budget is used up: \$0\.00 spent of \$0\.00/);
    });
  });

  describe('billing.budget_threshold', () => {
    let receiver: Receiver;

    beforeEach(async () => {
      receiver = await new Receiver().start();
    });

    afterEach(async () => {
      await receiver.stop();
    });

    async function subscribe(): Promise<{ id: string; secret: string }> {
      const response = await app.request
        .post('/api/v1/webhook-endpoints')
        .set({ ...as(owner), 'X-Org-Id': orgId })
        .send({ url: receiver.url, event_types: ['billing.budget_threshold'] });
      expect(response.status, JSON.stringify(response.body)).to.equal(201);
      rememberSecret(response.body.secret);
      return response.body;
    }

    const storedMessages = () => sql<{ data: Record<string, unknown> }>(`select data from webhook_messages where type = 'billing.budget_threshold' order by created_at, id`);

    it('crossing 50 and 80 % in one charge sends both, once each, signed; never again the same month', async () => {
      const { secret } = await subscribe();
      await putBudget(owner, { monthly_limit_usd: 10, alert_thresholds: [50, 80, 100] }).expect(200);
      worker = app.worker;
      await worker.start();

      const conversation = randomUUID();
      await report(member.teamKey, conversation, 4.99);
      await report(member.teamKey, conversation, 8.5, 2);
      expect(await waitFor(() => receiver.requests.length >= 2, 15_000)).to.equal(true);
      const bodies = receiver.requests.map((request) => verifyDelivery(secret, request) as { type: string; data: Record<string, unknown> });
      const month = thisMonth();
      const data = (percent: number) => ({
        org_id: orgId,
        scope: 'organization',
        user_id: null,
        percent,
        spend_usd: 8.5,
        spend_micro_usd: 8_500_000,
        limit_usd: 10,
        limit_micro_usd: 10_000_000,
        month,
      });
      expect(bodies.map((b) => b.type)).to.deep.equal(['billing.budget_threshold', 'billing.budget_threshold']);
      expect(bodies.map((b) => b.data).sort((a, b) => (a.percent as number) - (b.percent as number))).to.deep.equal([data(50), data(80)]);

      // More spend below 100 %, the same budget put again, a repeated post: nothing new this month.
      await report(member.teamKey, conversation, 9.5, 3);
      await putBudget(owner, { monthly_limit_usd: 10, alert_thresholds: [50, 80, 100] }).expect(200);
      await report(owner.teamKey, randomUUID(), 0.25);
      await report(member.teamKey, conversation, 9.5, 3);
      expect(await storedMessages()).to.have.length(2);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(receiver.requests).to.have.length(2);
    });

    it('sends a member\'s thresholds with the member, and the organization\'s reached after a lower limit', async () => {
      await subscribe();
      await putBudget(owner, { member_monthly_limit_usd: 1, alert_thresholds: [80, 100] }).expect(200);
      await report(member.teamKey, randomUUID(), 1.2);
      await report(owner.teamKey, randomUUID(), 0.5);
      const member80 = { org_id: orgId, scope: 'member', user_id: member.userId, spend_usd: 1.2, spend_micro_usd: 1_200_000, limit_usd: 1, limit_micro_usd: 1_000_000, month: thisMonth() };
      expect((await storedMessages()).map((m) => m.data)).to.deep.equal([{ ...member80, percent: 80 }, { ...member80, percent: 100 }]);

      // A limit lowered below what was spent: the next charge sends what it now reaches.
      await putBudget(owner, { monthly_limit_usd: 2, member_monthly_limit_usd: 1, alert_thresholds: [80, 100] }).expect(200);
      await report(owner.teamKey, randomUUID(), 0.01);
      const after = (await storedMessages()).map((m) => m.data).slice(2);
      expect(after).to.deep.equal([
        { org_id: orgId, scope: 'organization', user_id: null, percent: 80, spend_usd: 1.71, spend_micro_usd: 1_710_000, limit_usd: 2, limit_micro_usd: 2_000_000, month: thisMonth() },
      ]);
    });

    it('is in the catalog of message types, with its schema and example', async () => {
      const { body } = await app.request.get('/api/v1/webhook-event-types').set(as(owner)).expect(200);
      const entry = body.items.find((item: { type: string }) => item.type === 'billing.budget_threshold');
      expect(entry).to.include({ operational: false });
      expect(entry.description).to.match(/alert threshold/);
      expect(entry.schema.properties.data.required).to.include.members(['org_id', 'scope', 'percent', 'spend_usd', 'limit_usd', 'month']);
      expect(entry.example.data).to.include({ scope: 'organization', percent: 80 });
    });
  });
});
