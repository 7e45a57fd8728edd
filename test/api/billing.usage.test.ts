import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { minimalEvent } from '../fixtures/events.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { postEvents } from '../helpers/webhook.ts';
import { addOrganizationMember, createOrganizationFixture } from '../helpers/org-members.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';
import { usageRollupsBackfill } from '../../src/db/migrations/Migration20261127136000_usage_rollups.ts';
import { usageMemberRollupsBackfill } from '../../src/db/migrations/Migration20261127211000_usage_members.ts';

/**
 * GET /api/billing/usage: the agent-server's ConversationInfo fixture (software-agent-sdk's
 * `model_dump(mode="json")`) posted with growing costs, tokens and calls, next to event batches, and
 * what usage, spend and credits then say.
 */
const infoText = readFileSync(new URL('../fixtures/agent-server/conversation-info.json', import.meta.url), 'utf8');
type Info = Record<string, any>;

const CLAUDE = 'anthropic/claude-sonnet-4-5';
const MINI = 'openai/gpt-4o-mini';
const GROUPINGS = ['day', 'model', 'member', 'conversation'] as const;
const DAY_MS = 86_400_000;

/** A usage's cumulative figures as the SDK reports them: cost in dollars, prompt and completion tokens, calls. */
type Usage = [model: string, cost: number, tokensIn: number, tokensOut: number, calls: number];

/** `updated_at` `seconds` after a fixed instant. */
const at = (seconds: number) => new Date(Date.parse('2026-11-23T18:00:00Z') + seconds * 1000).toISOString();
const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const today = () => Math.floor(Date.now() / DAY_MS) * DAY_MS;

/** The fixture for `conversationId` at `updatedAt`, one LLM usage per entry, each with its token usage and one `token_usages` entry per call. */
function conversationInfo(conversationId: string, updatedAt: string, usages: Record<string, Usage>, title = 'Fix the failing test'): Info {
  const info = JSON.parse(infoText) as Info;
  const template = info.stats.usage_to_metrics.agent;
  info.id = conversationId;
  info.title = title;
  info.updated_at = updatedAt;
  info.metrics = null; // as today's agent-server sends it: the figures are in `stats`
  info.stats.usage_to_metrics = Object.fromEntries(
    Object.entries(usages).map(([usageId, [model, cost, tokensIn, tokensOut, calls]]) => [
      usageId,
      {
        ...template,
        model_name: model,
        accumulated_cost: cost,
        accumulated_token_usage: { ...template.accumulated_token_usage, model, prompt_tokens: tokensIn, completion_tokens: tokensOut },
        costs: [],
        token_usages: Array.from({ length: calls }, (_, n) => ({ ...template.token_usages[0], model, response_id: `resp_${n}` })),
      },
    ]),
  );
  return info;
}

describe('GET /api/billing/usage', () => {
  let client: TestApp;
  let user: UserFixture;
  let other: UserFixture;
  before(async () => {
    client = await createTestApp();
  });
  beforeEach(async () => {
    user = await createUserFixture();
    other = await createUserFixture();
  });

  const post = (body: Info, who = user) =>
    client.request.post('/api/v1/webhooks/conversations').set('X-Session-API-Key', who.sessionApiKey).set('Content-Type', 'application/json').send(JSON.stringify(body));
  const get = (path: string, who = user) => client.request.get(path).set('X-Access-Token', who.accessToken);
  const usage = async (query: string, who = user) => (await get(`/api/billing/usage?${query}`, who).expect(200)).body;
  const spend = async (query: string, who = user) => (await get(`/api/billing/spend?${query}&limit=100`, who).expect(200)).body;
  const credits = async (who = user) => (await get('/api/billing/credits', who).expect(200)).body;
  const sql = (text: string, values: unknown[] = []) => testDatabase().orm.em.getConnection().execute(text, values);
  /** Moves what a conversation has used back by `days`, in the ledger and in usage alike: as if its infos had arrived then. */
  const receivedDaysAgo = async (conversationId: string, days: number) => {
    await sql(`update spend_entries set charged_at = charged_at - make_interval(days => ?) where conversation_id = ?`, [days, conversationId]);
    await sql(`update usage_daily set day = day - ? where conversation_id = ?`, [days, conversationId]);
    await sql(usageRollupsBackfill() + usageMemberRollupsBackfill()); // the rollups as the migration builds them from usage_daily
  };

  /**
   * Three conversations of the caller, growing over several posts with awkward amounts (half and
   * sevenths of micro-dollars), two usages on two models in one, event batches with a `stats` state
   * update between infos; and one conversation of another user. Returns the caller's conversations.
   */
  async function realisticUsage(): Promise<string[]> {
    const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()];
    const message = (text: string) => minimalEvent('MessageEvent', { id: randomUUID(), source: 'user', llm_message: { role: 'user', content: [{ type: 'text', text }] } });
    await postEvents(client, user.sessionApiKey, a, [message('Fix the parser')]).expect(200);
    await post(conversationInfo(a, at(100), { agent: [CLAUDE, 0.0123455, 1200, 300, 1] }, 'Fix the parser')).expect(200); // the events created it
    // The event webhook's stats refresh the shown metrics and count nothing: the next info does.
    const stats = { usage_to_metrics: { agent: { model_name: CLAUDE, accumulated_cost: 0.05, accumulated_token_usage: { prompt_tokens: 5000, completion_tokens: 700 } } } };
    await postEvents(client, user.sessionApiKey, a, [minimalEvent('ConversationStateUpdateEvent', { id: randomUUID(), key: 'stats', value: stats })]).expect(200);
    await post(conversationInfo(a, at(200), { agent: [CLAUDE, 0.0523455, 5000, 700, 3], condenser: [MINI, 1 / 7000, 900, 80, 1] }, 'Fix the parser')).expect(200);
    await post(conversationInfo(a, at(200), { agent: [CLAUDE, 0.0523455, 5000, 700, 3], condenser: [MINI, 1 / 7000, 900, 80, 1] }, 'Fix the parser')).expect(200); // a retry
    await post(conversationInfo(a, at(150), { agent: [CLAUDE, 0.03, 3000, 500, 2] }, 'Fix the parser')).expect(200); // late
    await post(conversationInfo(b, at(100), { agent: [MINI, 0.0000005, 40, 4, 1] }, 'Tiny question')).expect(201);
    await post(conversationInfo(b, at(300), { agent: [MINI, 0.3333333, 70_000, 9000, 12] }, 'Tiny question')).expect(200);
    // Tokens without any cost yet: counted in usage, charged nothing.
    await post(conversationInfo(c, at(100), { agent: [CLAUDE, 0, 800, 20, 1] }, 'Free so far')).expect(201);
    await post(conversationInfo(randomUUID(), at(100), { agent: [CLAUDE, 9.99, 999_999, 99_999, 99] }, 'Someone else'), other).expect(201);
    return [a, b, c];
  }

  it('equals spend and credits to the micro-dollar for every grouping, and sums tokens and calls once', async () => {
    const [a, b, c] = await realisticUsage();
    const spent = (await credits()).spent_micro_usd;
    expect(spent).to.equal(52_346 + 143 + 333_333); // 0.0523455 and 0.3333333 round half up; 1/7000 is 142.857… → 143
    for (const groupBy of GROUPINGS) {
      const report = await usage(`group_by=${groupBy}`);
      const range = `since=${report.since}T00:00:00Z&until=${report.until}T00:00:00Z`;
      const spendReport = await spend(`group_by=${groupBy === 'member' ? 'conversation' : groupBy}&${range}`);
      expect(report.totals, groupBy).to.deep.equal({
        cost_usd: spent / 1e6,
        cost_micro_usd: spent,
        tokens_in: 5000 + 900 + 70_000 + 800,
        tokens_out: 700 + 80 + 9000 + 20,
        conversations: 3,
        llm_calls: 3 + 1 + 12 + 1,
      });
      expect(spendReport.total_micro_usd, groupBy).to.equal(spent);
      expect(report.rows.reduce((sum: number, row: Info) => sum + row.cost_micro_usd, 0), groupBy).to.equal(spent);
      expect(report.rows.reduce((sum: number, row: Info) => sum + row.tokens_in, 0), groupBy).to.equal(report.totals.tokens_in);
      for (const row of report.rows) expect(row.cost_usd.toFixed(6)).to.equal((row.cost_micro_usd / 1e6).toFixed(6));
      // Each group equals spend's group of the same key (spend lists only groups that were charged).
      const spendKey = (row: Info) => row.conversation_id ?? row.model_name ?? row.day;
      const charged = new Map(spendReport.items.map((row: Info) => [spendKey(row), row.amount_micro_usd]));
      if (groupBy !== 'member') for (const row of report.rows) expect(row.cost_micro_usd, `${groupBy} ${row.key}`).to.equal(charged.get(row.key) ?? 0);
    }

    const byModel = await usage('group_by=model');
    expect(byModel.rows.map((row: Info) => [row.key, row.label, row.cost_micro_usd, row.tokens_in, row.tokens_out, row.conversations, row.llm_calls])).to.deep.equal([
      [MINI, null, 333_333 + 143, 70_000 + 900, 9000 + 80, 2, 13],
      [CLAUDE, null, 52_346, 5000 + 800, 700 + 20, 2, 4],
    ]);
    // A limit cuts the rows, never the totals.
    const topModel = await usage('group_by=model&limit=1');
    expect(topModel.rows.map((row: Info) => row.key)).to.deep.equal([MINI]);
    expect(topModel).to.deep.include({ totals: byModel.totals, group_count: 2, limit: 1 });
    const byConversation = await usage('group_by=conversation');
    expect(byConversation.rows.map((row: Info) => [row.key, row.label, row.cost_micro_usd, row.conversations])).to.deep.equal([
      [b, 'Tiny question', 333_333, 1],
      [a, 'Fix the parser', 52_346 + 143, 1],
      [c, 'Free so far', 0, 1],
    ]);
    const byMember = await usage('group_by=member');
    expect(byMember.rows.map((row: Info) => [row.key, row.label, row.conversations])).to.deep.equal([[user.userId, user.email, 3]]);
    const byDay = await usage('group_by=day');
    expect(byDay.rows.map((row: Info) => row.key)).to.deep.equal([dayOf(today())]);
    expect(byDay.rows[0].label).to.match(/^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{1,2} [A-Z][a-z]{2} \d{4}$/);
  });

  it('orders days oldest first and the other groupings by cost, and bounds conversations by limit', async () => {
    const ids: string[] = [];
    for (let n = 0; n < 5; n++) {
      const id = randomUUID();
      ids.push(id);
      await post(conversationInfo(id, at(100), { agent: [CLAUDE, 0.01 * (n + 1), 100 * (n + 1), 10, 1] }, `Task ${n}`)).expect(201);
      await receivedDaysAgo(id, n * 2); // one conversation every other day
    }
    const byDay = await usage('group_by=day');
    expect(byDay.rows.map((row: Info) => row.key)).to.deep.equal([8, 6, 4, 2, 0].map((days) => dayOf(today() - days * DAY_MS)));
    const range = `since=${byDay.since}T00:00:00Z&until=${byDay.until}T00:00:00Z`;
    const spendDays = await spend(`group_by=day&${range}`);
    expect(byDay.rows.map((row: Info) => [row.key, row.cost_micro_usd])).to.deep.equal(spendDays.items.map((row: Info) => [row.day, row.amount_micro_usd]).reverse());

    const top = await usage('group_by=conversation&limit=2');
    expect(top.rows.map((row: Info) => row.key)).to.deep.equal([ids[4], ids[3]]);
    expect(top).to.include({ group_count: 5, limit: 2 });
    expect(top.totals).to.include({ cost_micro_usd: 150_000, conversations: 5 });
    await get('/api/billing/usage?group_by=conversation&limit=101').expect(422);
    await get('/api/billing/usage?group_by=conversation&limit=0').expect(422);
  });

  it('covers the last 30 days by default, today included; older usage only when asked for', async () => {
    const [recent, old] = [randomUUID(), randomUUID()];
    await post(conversationInfo(recent, at(100), { agent: [CLAUDE, 0.02, 100, 10, 1] })).expect(201);
    await post(conversationInfo(old, at(100), { agent: [CLAUDE, 0.5, 100, 10, 1] })).expect(201);
    await receivedDaysAgo(recent, 29);
    await receivedDaysAgo(old, 30);
    const byDefault = await usage('');
    expect(byDefault).to.include({ group_by: 'day', since: dayOf(today() - 29 * DAY_MS), until: dayOf(today() + DAY_MS), group_count: 1, limit: 20 });
    expect(byDefault.rows.map((row: Info) => [row.key, row.cost_micro_usd])).to.deep.equal([[dayOf(today() - 29 * DAY_MS), 20_000]]);
    const wider = await usage(`since=${dayOf(today() - 30 * DAY_MS)}`);
    expect(wider.totals).to.include({ cost_micro_usd: 520_000, conversations: 2 });
    expect((await credits()).spent_micro_usd).to.equal(520_000);
    // `until` alone: the 30 days before it.
    const before = await usage(`until=${dayOf(today() - 29 * DAY_MS)}`);
    expect(before).to.include({ since: dayOf(today() - 59 * DAY_MS), until: dayOf(today() - 29 * DAY_MS) });
    expect(before.rows.map((row: Info) => row.key)).to.deep.equal([dayOf(today() - 30 * DAY_MS)]);
  });

  describe('the range: at most 366 days, forwards, real days → 422 naming the parameter', () => {
    const cases: [string, string, string][] = [
      ['367 days from since to until', 'since=2025-01-01&until=2026-01-03', 'until'],
      ['since alone more than 366 days ago', `since=${dayOf(Date.now() - 400 * DAY_MS)}`, 'since'],
      ['until not after since', 'since=2026-11-02&until=2026-11-02', 'until'],
      ['since in the future (until by default)', `since=${dayOf(Date.now() + 10 * DAY_MS)}`, 'since'],
      ['a day that does not exist', 'since=2026-02-30', 'since'],
      ['a date-time instead of a day', 'until=2026-11-02T00:00:00Z', 'until'],
      ['year 0', 'since=0000-12-31', 'since'],
    ];
    for (const [what, query, parameter] of cases) {
      it(`refuses ${what}`, async () => {
        const response = await get(`/api/billing/usage?${query}`).expect(422);
        expect(response.body.detail.map((d: Info) => d.loc)).to.deep.include(['query', parameter]);
      });
    }

    it('accepts exactly 366 days', async () => {
      expect(await usage('since=2024-01-01&until=2025-01-01')).to.include({ since: '2024-01-01', until: '2025-01-01', group_count: 0 });
    });
  });

  it("never shows another user's usage, in any grouping", async () => {
    await realisticUsage();
    const mine = new Set<string>();
    for (const groupBy of GROUPINGS) for (const row of (await usage(`group_by=${groupBy}&limit=100`)).rows) mine.add(row.key);
    expect(mine).to.include(user.userId).and.not.to.include(other.userId);
    for (const groupBy of GROUPINGS) {
      const theirs = await usage(`group_by=${groupBy}&limit=100`, other);
      expect(theirs.totals).to.deep.equal({ cost_usd: 9.99, cost_micro_usd: 9_990_000, tokens_in: 999_999, tokens_out: 99_999, conversations: 1, llm_calls: 99 });
      if (groupBy !== 'day' && groupBy !== 'model') for (const row of theirs.rows) expect(mine.has(row.key), row.key).to.equal(false);
      if (groupBy === 'member') expect(theirs.rows.map((row: Info) => row.label)).to.deep.equal([other.email]);
    }
    await get('/api/billing/usage').set('X-Access-Token', 'not-a-token').expect(401);
  });

  it('counts tokens like costs: a runtime that restarts its counters counts again from the new value, never twice', async () => {
    const id = randomUUID();
    await post(conversationInfo(id, at(100), { agent: [CLAUDE, 0.05, 4000, 400, 4] })).expect(201);
    await post(conversationInfo(id, at(200), { agent: [CLAUDE, 0.01, 1000, 100, 1] })).expect(200); // restarted
    await post(conversationInfo(id, at(300), { agent: [CLAUDE, 0.02, 1500, 150, 2] })).expect(200);
    await post(conversationInfo(id, at(250), { agent: [CLAUDE, 0.9, 9000, 900, 9] })).expect(200); // late
    const report = await usage('group_by=conversation');
    expect(report.totals).to.include({ cost_micro_usd: 60_000, tokens_in: 4500, tokens_out: 450, llm_calls: 5 });
    expect((await credits()).spent_micro_usd).to.equal(60_000);
  });

  describe('the rollups the ConversationInfo post keeps (days, models, conversations)', () => {
    /** Every rollup row, in a fixed order, as text. */
    const rollups = async () => ({
      days: await sql('select owner_id::text, day::text, prev_day::text, conversations::text, cost_micro_usd::text, tokens_in::text, tokens_out::text, llm_calls::text from usage_owner_days order by 1, 2, 3'),
      models: await sql('select owner_id::text, day::text, model_name, prev_day::text, conversations::text, cost_micro_usd::text, tokens_in::text, llm_calls::text from usage_model_days order by 1, 2, 3, 4'),
      conversations: await sql('select conversation_id::text, owner_id::text, first_day::text, last_day::text, prev_day::text, cost_micro_usd::text, tokens_in::text, tokens_out::text, llm_calls::text from usage_conversations order by 1'),
      conversationModels: await sql('select conversation_id::text, model_name, last_day::text, prev_day::text from usage_conversation_models order by 1, 2'),
    });
    const daysAgo = (days: number) => dayOf(today() - days * DAY_MS);
    const tomorrow = () => daysAgo(-1);

    /**
     * X: Claude 5 days ago, Claude and Mini 2 days ago, Claude today (the post's statement finding its
     * previous days each time); Y: Mini 5 days ago only; Z: Claude today. Returns [x, y, z].
     */
    async function threeConversationsOverDays(): Promise<[string, string, string]> {
      const [x, y, z] = [randomUUID(), randomUUID(), randomUUID()];
      await post(conversationInfo(x, at(100), { agent: [CLAUDE, 0.5, 5000, 500, 5] }, 'Long one')).expect(201);
      await post(conversationInfo(y, at(100), { agent: [MINI, 0.25, 2500, 250, 2] }, 'Old one')).expect(201);
      await receivedDaysAgo(x, 3);
      await receivedDaysAgo(y, 5);
      await post(conversationInfo(x, at(200), { agent: [CLAUDE, 0.6, 6000, 600, 6], condenser: [MINI, 0.001, 100, 10, 1] }, 'Long one')).expect(200);
      await post(conversationInfo(x, at(250), { agent: [CLAUDE, 0.65, 6500, 650, 7], condenser: [MINI, 0.002, 200, 20, 2] }, 'Long one')).expect(200); // same day again
      await receivedDaysAgo(x, 2); // 5 and 2 days ago
      await post(conversationInfo(x, at(300), { agent: [CLAUDE, 0.7, 7000, 700, 8], condenser: [MINI, 0.002, 200, 20, 2] }, 'Long one')).expect(200);
      await post(conversationInfo(z, at(100), { agent: [CLAUDE, 0.03, 300, 30, 1] }, 'New one')).expect(201);
      return [x, y, z];
    }

    it('writes, post by post, exactly what the backfill builds from usage_daily', async () => {
      const [x, , z] = await threeConversationsOverDays();
      // Today again: X's second model grows (its last day was 2 days ago), Z grows on the same day.
      await post(conversationInfo(x, at(400), { agent: [CLAUDE, 0.7, 7000, 700, 8], condenser: [MINI, 0.004, 300, 30, 3] }, 'Long one')).expect(200);
      await post(conversationInfo(z, at(200), { agent: [CLAUDE, 0.04, 400, 40, 2] }, 'New one')).expect(200);
      await post(conversationInfo(randomUUID(), at(100), { agent: [CLAUDE, 1, 10, 1, 1] }), other).expect(201);
      const written = await rollups();
      expect(written.days.length).to.be.greaterThan(3);
      await sql(usageRollupsBackfill() + usageMemberRollupsBackfill());
      expect(await rollups()).to.deep.equal(written);
    });

    it('counts a conversation once per range however many days and models it used, and once per day', async () => {
      const [x] = await threeConversationsOverDays();
      const since = daysAgo(5);
      const byDay = await usage(`group_by=day&since=${since}`);
      expect(byDay.rows.map((row: Info) => [row.key, row.conversations, row.cost_micro_usd])).to.deep.equal([
        [daysAgo(5), 2, 500_000 + 250_000],
        [daysAgo(2), 1, 150_000 + 2_000],
        [daysAgo(0), 2, 50_000 + 30_000],
      ]);
      expect(byDay.totals).to.include({ conversations: 3, cost_micro_usd: 982_000 });
      // From 2 days ago: X (both days) and Z; Y is before the range.
      for (const groupBy of GROUPINGS) expect((await usage(`group_by=${groupBy}&since=${daysAgo(2)}`)).totals, groupBy).to.include({ conversations: 2, cost_micro_usd: 232_000 });
      // Today only: X and Z, each once.
      expect((await usage(`group_by=member&since=${daysAgo(0)}`)).rows.map((row: Info) => row.conversations)).to.deep.equal([2]);
      const byModel = await usage(`group_by=model&since=${since}`);
      expect(byModel.rows.map((row: Info) => [row.key, row.conversations, row.cost_micro_usd, row.llm_calls])).to.deep.equal([
        [CLAUDE, 2, 700_000 + 30_000, 8 + 1],
        [MINI, 2, 250_000 + 2_000, 2 + 2],
      ]);
      const modelsFromYesterday = await usage(`group_by=model&since=${daysAgo(1)}`);
      expect(modelsFromYesterday.rows.map((row: Info) => [row.key, row.conversations])).to.deep.equal([[CLAUDE, 2]]);
      expect((await usage(`group_by=conversation&since=${since}`)).totals).to.include({ conversations: 3 });
      expect(x).to.be.a('string');
    });

    it('sums a conversation within the range when it also used something before or after it', async () => {
      const [x, y, z] = await threeConversationsOverDays();
      const rows = async (query: string) => (await usage(`group_by=conversation&${query}`)).rows.map((row: Info) => [row.key, row.cost_micro_usd, row.tokens_in, row.llm_calls]);
      // X straddles `since`: only today's part.
      expect(await rows(`since=${daysAgo(1)}`)).to.deep.equal([
        [x, 50_000, 500, 1],
        [z, 30_000, 300, 1],
      ]);
      // X straddles `until`: what it used 5 and 2 days ago; Y inside.
      expect(await rows(`since=${daysAgo(5)}&until=${daysAgo(0)}`)).to.deep.equal([
        [x, 652_000, 6700, 9],
        [y, 250_000, 2500, 2],
      ]);
      // X straddles both, with nothing of its own inside: not listed, not counted.
      const gap = await usage(`group_by=conversation&since=${daysAgo(4)}&until=${daysAgo(2)}`);
      expect(gap.rows).to.deep.equal([]);
      expect(gap).to.deep.include({ group_count: 0, totals: { cost_usd: 0, cost_micro_usd: 0, tokens_in: 0, tokens_out: 0, conversations: 0, llm_calls: 0 } });
      // Everything: the running totals, largest first, and the limit takes the largest across inside and straddling ones.
      expect(await rows(`since=${daysAgo(5)}`)).to.deep.equal([
        [x, 702_000, 7200, 10],
        [y, 250_000, 2500, 2],
        [z, 30_000, 300, 1],
      ]);
      expect(await rows(`since=${daysAgo(2)}&limit=1`)).to.deep.equal([[x, 202_000, 2200, 5]]);
      expect(tomorrow()).to.equal((await usage('group_by=day')).until);
    });

    it('a restarted counter on a later day adds nothing, then counts the conversation on the day it grows again', async () => {
      const id = randomUUID();
      await post(conversationInfo(id, at(100), { agent: [CLAUDE, 0.05, 4000, 400, 4] })).expect(201);
      await receivedDaysAgo(id, 3);
      await post(conversationInfo(id, at(200), { agent: [CLAUDE, 0.01, 1000, 100, 1] })).expect(200); // restarted: nothing counted today
      expect((await usage(`group_by=day&since=${daysAgo(3)}`)).rows.map((row: Info) => [row.key, row.conversations])).to.deep.equal([[daysAgo(3), 1]]);
      await post(conversationInfo(id, at(300), { agent: [CLAUDE, 0.02, 1500, 150, 2] })).expect(200);
      const byDay = await usage(`group_by=day&since=${daysAgo(3)}`);
      expect(byDay.rows.map((row: Info) => [row.key, row.conversations, row.cost_micro_usd, row.tokens_in, row.llm_calls])).to.deep.equal([
        [daysAgo(3), 1, 50_000, 4000, 4],
        [daysAgo(0), 1, 10_000, 500, 1],
      ]);
      expect(byDay.totals).to.include({ conversations: 1, cost_micro_usd: 60_000 });
      expect((await usage(`group_by=conversation&since=${daysAgo(0)}`)).rows.map((row: Info) => [row.key, row.cost_micro_usd])).to.deep.equal([[id, 10_000]]);
      expect((await credits()).spent_micro_usd).to.equal(60_000);
      const written = await rollups();
      await sql(usageRollupsBackfill() + usageMemberRollupsBackfill());
      expect(await rollups()).to.deep.equal(written);
    });
  });

  describe('group_by=member in an organization', () => {
    it('gives each member what their own runtime keys used, conversations counted per member once, and the organization the total', async () => {
      const orgId = await createOrganizationFixture(user.userId);
      await addOrganizationMember(orgId, other.userId, 'member');
      /** A session API key of `who` acting in the organization, made as a member makes one. */
      const keyOf = async (who: UserFixture) => {
        const created = await client.request.post('/api/keys').set('X-Access-Token', who.accessToken).set('X-Org-Id', orgId).send({ kind: 'session_api_key', name: 'runtime' }).expect(201);
        rememberSecret(created.body.secret);
        return { ...who, sessionApiKey: created.body.secret as string };
      };
      const [mine, theirs] = [await keyOf(user), await keyOf(other)];
      const [shared, own] = [randomUUID(), randomUUID()];
      await post(conversationInfo(shared, at(100), { agent: [CLAUDE, 0.1, 1000, 100, 2] }), mine).expect(201);
      await post(conversationInfo(shared, at(200), { agent: [CLAUDE, 0.25, 3000, 300, 5] }), theirs).expect(200);
      await post(conversationInfo(own, at(100), { agent: [MINI, 0.02, 500, 50, 1] }), theirs).expect(201);

      const team = await client.request.get('/api/billing/usage?group_by=member').set('X-Access-Token', user.accessToken).set('X-Org-Id', orgId).expect(200);
      expect(team.body.rows.map((row: Info) => [row.label, row.cost_micro_usd, row.tokens_in, row.conversations, row.llm_calls])).to.deep.equal([
        [other.email, 170_000, 2500, 2, 4],
        [user.email, 100_000, 1000, 1, 2],
      ]);
      // Both used the shared conversation: the organization counts it once.
      expect(team.body.totals).to.include({ cost_micro_usd: 270_000, conversations: 2 });
      // Neither member's personal organization saw any of it.
      expect((await usage('group_by=member')).rows).to.deep.equal([]);
    });
  });
});
