import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { parsePrometheusText, sumSamples } from '../helpers/prometheus.ts';
import { describeRun, killAllProcesses, startServerProcess, type ServerProcess } from '../helpers/server-process.ts';

/**
 * The spend ledger: the real ConversationInfo fixture (software-agent-sdk's `model_dump(mode="json")`)
 * posted with growing, repeated, late, concurrent and reset costs, and what `/api/billing/credits`,
 * `/api/billing/spend` and the conversation then show.
 */
const infoText = readFileSync(new URL('../fixtures/agent-server/conversation-info.json', import.meta.url), 'utf8');
type Info = Record<string, any>;

const CLAUDE = 'anthropic/claude-sonnet-4-5';
const MINI = 'openai/gpt-4o-mini';

/** `updated_at` `seconds` after the fixture's creation. */
const at = (seconds: number) => new Date(Date.parse('2026-11-23T18:00:00Z') + seconds * 1000).toISOString();

/**
 * The fixture for `conversationId` at `updatedAt`, with one LLM usage per entry of `usages`
 * (usage id → [model, cumulative cost in dollars]); `metrics` is their sum, as the agent-server sends it.
 */
function conversationInfo(conversationId: string, updatedAt: string, usages: Record<string, [string, number]>): Info {
  const info = JSON.parse(infoText) as Info;
  const template = info.stats.usage_to_metrics.agent;
  info.id = conversationId;
  info.updated_at = updatedAt;
  info.stats.usage_to_metrics = Object.fromEntries(
    Object.entries(usages).map(([usageId, [model, cost]]) => [usageId, { ...template, model_name: model, accumulated_cost: cost, costs: [] }]),
  );
  info.metrics.accumulated_cost = Object.values(usages).reduce((sum, [, cost]) => sum + cost, 0);
  return info;
}

describe('spend ledger (POST /api/v1/webhooks/conversations charges the increase of each usage)', () => {
  let client: TestApp;
  let user: UserFixture;
  before(async () => {
    client = await createTestApp({ metricsToken: undefined });
  });
  beforeEach(async () => {
    user = await createUserFixture();
  });

  const post = (body: Info | string, key = user.sessionApiKey) =>
    client.request
      .post('/api/v1/webhooks/conversations')
      .set('X-Session-API-Key', key)
      .set('Content-Type', 'application/json')
      .send(typeof body === 'string' ? body : JSON.stringify(body));
  const credits = async (who = user) => (await client.request.get('/api/billing/credits').set('X-Access-Token', who.accessToken).expect(200)).body;
  const spend = async (query: string, who = user) =>
    (await client.request.get(`/api/billing/spend?${query}`).set('X-Access-Token', who.accessToken).expect(200)).body;
  const conversation = async (conversationId: string) =>
    (await client.request.get(`/api/v1/conversations/${conversationId}`).set('X-Access-Token', user.accessToken).expect(200)).body;
  const entries = async (conversationId: string) =>
    (
      await testDatabase()
        .orm.em.getConnection()
        .execute<{ usage_id: string; amount: string }[]>(
          'select usage_id, amount_micro_usd::text as amount from spend_entries where conversation_id = ? order by id',
          [conversationId],
        )
    ).map((row) => [row.usage_id, Number(row.amount)]);
  const logLines = (message: string) => client.logs.filter((line) => line.includes(message));
  const buy = async (amountUsd: number, who = user) => {
    const created = await client.request.post('/api/billing/create-checkout-session').set('X-Access-Token', who.accessToken).send({ amount: amountUsd }).expect(200);
    const sessionId = new URL(created.body.redirect_url).pathname.split('/').pop()!;
    await client.request.post(`/billing/checkout/${sessionId}/confirm`).type('form').send('').expect(303);
  };

  it('charges the first post in full, a repeated post nothing, and each growing post only its increase', async () => {
    const id = randomUUID();
    const first = JSON.parse(infoText) as Info; // the fixture as it is: agent usage at 0.0123 USD
    first.id = id;
    await post(first).expect(201);
    await post(first).expect(200); // the agent-server retries the same post
    expect((await credits()).spent_micro_usd).to.equal(12_300);

    await post(conversationInfo(id, at(400), { agent: [CLAUDE, 0.05] })).expect(200);
    await post(conversationInfo(id, at(400), { agent: [CLAUDE, 0.05] })).expect(200);
    await post(conversationInfo(id, at(500), { agent: [CLAUDE, 0.1234567] })).expect(200);
    expect(await entries(id)).to.deep.equal([
      ['agent', 12_300],
      ['agent', 37_700],
      ['agent', 73_457], // 0.1234567 rounds (half up) to 123457 micro-dollars
    ]);
    const body = await credits();
    expect(body).to.include({ spent_micro_usd: 123_457, spent_usd: 0.123457, purchased_usd: 0, balance_micro_usd: -123_457, balance_usd: -0.123457, overdrawn: true });
    expect(await conversation(id)).to.include({ accumulated_cost_usd: 0.123457, accumulated_cost_micro_usd: 123_457 });
    const list = await client.request.get('/api/v1/conversations').set('X-Access-Token', user.accessToken).expect(200);
    expect(list.body.items[0]).to.include({ id, accumulated_cost_usd: 0.123457, accumulated_cost_micro_usd: 123_457 });
  });

  it('charges nothing for a post older (updated_at) than the newest one, and the increase after it once', async () => {
    const id = randomUUID();
    await post(conversationInfo(id, at(300), { agent: [CLAUDE, 0.05] })).expect(201);
    await post(conversationInfo(id, at(200), { agent: [CLAUDE, 0.03] })).expect(200); // a late retry
    await post(conversationInfo(id, at(100), { agent: [CLAUDE, 0.01] })).expect(200);
    expect((await credits()).spent_micro_usd).to.equal(50_000);
    await post(conversationInfo(id, at(400), { agent: [CLAUDE, 0.06] })).expect(200);
    await post(conversationInfo(id, at(350), { agent: [CLAUDE, 0.055] })).expect(200);
    expect(await entries(id)).to.deep.equal([
      ['agent', 50_000],
      ['agent', 10_000],
    ]);
    expect((await conversation(id)).accumulated_cost_micro_usd).to.equal(60_000);
  });

  it('charges two LLM usages separately and groups them per model', async () => {
    const id = randomUUID();
    await post(conversationInfo(id, at(100), { agent: [CLAUDE, 0.02], condenser: [MINI, 0.001] })).expect(201);
    await post(conversationInfo(id, at(200), { agent: [CLAUDE, 0.05], condenser: [MINI, 0.001] })).expect(200);
    await post(conversationInfo(id, at(300), { agent: [CLAUDE, 0.05], condenser: [MINI, 0.0033] })).expect(200);
    // A second conversation on the same model adds to its group.
    const other = randomUUID();
    await post(conversationInfo(other, at(100), { agent: [CLAUDE, 0.007] })).expect(201);

    const byModel = await spend('group_by=model');
    expect(byModel.items.map((row: Info) => [row.model_name, row.amount_micro_usd, row.entry_count])).to.deep.equal([
      [CLAUDE, 57_000, 3],
      [MINI, 3_300, 2],
    ]);
    expect(byModel.items[0]).to.include({ conversation_id: null, title: null, day: null, amount_usd: 0.057 });
    expect(byModel).to.include({ group_by: 'model', total_micro_usd: 60_300, total_usd: 0.0603, entry_count: 5, group_count: 2, next_offset: null });
    expect((await credits()).spent_micro_usd).to.equal(60_300);
    expect((await conversation(id)).accumulated_cost_micro_usd).to.equal(53_300);

    const byConversation = await spend('group_by=conversation');
    expect(byConversation.items.map((row: Info) => [row.conversation_id, row.title, row.amount_micro_usd])).to.deep.equal([
      [other, 'Fix the failing test', 7_000],
      [id, 'Fix the failing test', 53_300],
    ]);
  });

  it('a counter reset (a lower cost in a newer post) charges nothing, is logged once, and later increases are charged', async () => {
    const id = randomUUID();
    await post(conversationInfo(id, at(100), { agent: [CLAUDE, 0.05] })).expect(201);
    await post(conversationInfo(id, at(200), { agent: [CLAUDE, 0.01] })).expect(200); // the runtime restarted its counters
    await post(conversationInfo(id, at(200), { agent: [CLAUDE, 0.01] })).expect(200); // the same post again
    expect((await credits()).spent_micro_usd).to.equal(50_000);
    const resets = logLines('spend counter decreased');
    expect(resets).to.have.length(1);
    expect(JSON.parse(resets[0]!)).to.include({ conversationId: id, usageId: 'agent', countedMicroUsd: '50000', reportedMicroUsd: '10000', level: 40 });

    await post(conversationInfo(id, at(300), { agent: [CLAUDE, 0.04] })).expect(200);
    await post(conversationInfo(id, at(150), { agent: [CLAUDE, 0.06] })).expect(200); // late, from before the reset
    expect(await entries(id)).to.deep.equal([
      ['agent', 50_000],
      ['agent', 30_000],
    ]);
    expect(logLines('spend counter decreased')).to.have.length(1);
  });

  it('reads each cost from the JSON text: digits a double cannot hold decide the micro-dollar', async () => {
    const id = randomUUID();
    // As a double this is 1.0000005 (rounding up to 1000001 micro-dollars); its exact value rounds down.
    const text = JSON.stringify(conversationInfo(id, at(100), { agent: [CLAUDE, 7] })).replace(
      '"accumulated_cost":7,',
      '"accumulated_cost":1.00000049999999999999999,',
    );
    await post(text).expect(201);
    // 5e-7 is exactly half a micro-dollar: half up. (As doubles, 5e-7 × 1e6 is 0.49999999999999994.)
    await post(JSON.stringify(conversationInfo(id, at(200), { agent: [CLAUDE, 1.0000005] }))).expect(200);
    expect(await entries(id)).to.deep.equal([
      ['agent', 1_000_000],
      ['agent', 1],
    ]);
  });

  it('a balance going below zero counts once in billing_balances_depleted_total and is logged', async () => {
    const metric = async () => sumSamples(parsePrometheusText((await client.request.get('/metrics').expect(200)).text), 'billing_balances_depleted_total');
    const before = await metric();
    await buy(1);
    const id = randomUUID();
    await post(conversationInfo(id, at(100), { agent: [CLAUDE, 0.5] })).expect(201);
    expect(await credits()).to.include({ purchased_usd: 1, balance_usd: 0.5, overdrawn: false });
    expect(await metric()).to.equal(before);

    await post(conversationInfo(id, at(200), { agent: [CLAUDE, 1.25] })).expect(200);
    expect(await credits()).to.include({ purchased_micro_usd: 1_000_000, spent_micro_usd: 1_250_000, balance_usd: -0.25, balance_micro_usd: -250_000, overdrawn: true });
    expect(await metric()).to.equal(before + 1);
    await post(conversationInfo(id, at(300), { agent: [CLAUDE, 2] })).expect(200); // still below: not again
    expect(await metric()).to.equal(before + 1);
    expect(logLines('balance depleted').filter((line) => line.includes(user.userId))).to.have.length(1);

    await buy(5); // back above zero; the next crossing counts again
    await post(conversationInfo(id, at(400), { agent: [CLAUDE, 6.5] })).expect(200);
    expect(await credits()).to.include({ balance_usd: -0.5, overdrawn: true });
    expect(await metric()).to.equal(before + 2);
  });

  it('GET /api/billing/credits and GET /api/billing/spend agree to the micro-dollar, page by page and by every grouping', async () => {
    await buy(2);
    const costs = [0.0000004, 0.0000005, 0.1234565, 0.3333333, 0.6666667, 0.0101, 0.99999949];
    for (const [n, cost] of costs.entries()) {
      const id = randomUUID();
      await post(conversationInfo(id, at(100), { agent: [CLAUDE, cost / 2], condenser: [MINI, cost / 3] })).expect(201);
      await post(conversationInfo(id, at(200), { agent: [CLAUDE, cost], condenser: [MINI, cost / 3 + n * 0.0000013] })).expect(200);
    }
    const body = await credits();
    const spentMicroUsd = Number(
      (
        await testDatabase()
          .orm.em.getConnection()
          .execute<{ sum: string }[]>('select sum(amount_micro_usd)::text as sum from spend_entries where owner_id = ?', [user.userId])
      )[0]!.sum,
    );
    expect(body.spent_micro_usd).to.equal(spentMicroUsd);
    expect(body.balance_micro_usd).to.equal(2_000_000 - spentMicroUsd);
    expect(body.spent_usd.toFixed(6)).to.equal((spentMicroUsd / 1e6).toFixed(6));
    expect(body.balance_usd.toFixed(6)).to.equal(((2_000_000 - spentMicroUsd) / 1e6).toFixed(6));

    for (const groupBy of ['conversation', 'model', 'day']) {
      let offset: number | null = 0;
      let sum = 0;
      let rows = 0;
      while (offset !== null) {
        const page = await spend(`group_by=${groupBy}&limit=2&offset=${offset}`);
        expect(page.total_micro_usd, groupBy).to.equal(spentMicroUsd);
        for (const row of page.items) {
          sum += row.amount_micro_usd;
          expect(row.amount_usd.toFixed(6)).to.equal((row.amount_micro_usd / 1e6).toFixed(6));
        }
        rows += page.items.length;
        offset = page.next_offset;
      }
      expect(sum, groupBy).to.equal(spentMicroUsd);
      // The first conversation's 0.4 micro-dollars round to nothing: it has no charge, so no row.
      expect(rows, groupBy).to.equal({ conversation: costs.length - 1, model: 2, day: 1 }[groupBy]);
    }
  });

  describe('bad costs → 422 naming the field; nothing of the info is stored', () => {
    const cases: [string, (info: Info) => void, (string | number)[], string][] = [
      ['a negative usage cost', (info) => (info.stats.usage_to_metrics.agent.accumulated_cost = -0.01), ['body', 'stats', 'usage_to_metrics', 'agent', 'accumulated_cost'], 'greater_than_equal'],
      ['a usage cost that is not a number', (info) => (info.stats.usage_to_metrics.agent.accumulated_cost = '0.5'), ['body', 'stats', 'usage_to_metrics', 'agent', 'accumulated_cost'], 'float_type'],
      ['a usage cost over 1,000,000 USD', (info) => (info.stats.usage_to_metrics.agent.accumulated_cost = 1_000_000.01), ['body', 'stats', 'usage_to_metrics', 'agent', 'accumulated_cost'], 'less_than_equal'],
      ['a null usage cost', (info) => (info.stats.usage_to_metrics.agent.accumulated_cost = null), ['body', 'stats', 'usage_to_metrics', 'agent', 'accumulated_cost'], 'float_type'],
      ['a negative conversation cost', (info) => (info.metrics.accumulated_cost = -1), ['body', 'metrics', 'accumulated_cost'], 'greater_than_equal'],
      ['an absurd conversation cost', (info) => (info.metrics.accumulated_cost = 1e9), ['body', 'metrics', 'accumulated_cost'], 'less_than_equal'],
      ['a negative cost of one call', (info) => (info.stats.usage_to_metrics.agent.costs = [{ model: CLAUDE, cost: -0.5, timestamp: 1 }]), ['body', 'stats', 'usage_to_metrics', 'agent', 'costs', 0, 'cost'], 'greater_than_equal'],
    ];
    for (const [what, spoil, loc, type] of cases) {
      it(`returns 422 for ${what}`, async () => {
        const id = randomUUID();
        await post(conversationInfo(id, at(100), { agent: [CLAUDE, 0.05] })).expect(201);
        const bad = conversationInfo(id, at(200), { agent: [CLAUDE, 0.07] });
        bad.title = 'Should not be stored';
        spoil(bad);
        const response = await post(bad).expect(422);
        expect(response.body.detail.map((d: Info) => [d.loc, d.type])).to.deep.include([loc, type]);
        expect(await conversation(id)).to.include({ title: 'Fix the failing test', accumulated_cost_micro_usd: 50_000 });
        expect((await credits()).spent_micro_usd).to.equal(50_000);
      });
    }

    it('returns 422 json_invalid for NaN or Infinity (Python writes them; JSON has no such numbers), creating nothing', async () => {
      const id = randomUUID();
      for (const literal of ['NaN', 'Infinity', '-Infinity']) {
        const text = JSON.stringify(conversationInfo(id, at(100), { agent: [CLAUDE, 7] })).replace('"accumulated_cost":7,', `"accumulated_cost":${literal},`);
        const response = await post(text).expect(422);
        expect(response.body.detail[0].type).to.equal('json_invalid');
      }
      await client.request.get(`/api/v1/conversations/${id}`).set('X-Access-Token', user.accessToken).expect(404);
      expect((await credits()).spent_micro_usd).to.equal(0);
    });
  });

  describe('GET /api/billing/spend', () => {
    /** Moves a conversation's charges to `instant` (charges are stamped when received). */
    const chargedAt = (conversationId: string, instant: string) =>
      testDatabase().orm.em.getConnection().execute('update spend_entries set charged_at = ? where conversation_id = ?', [instant, conversationId]);

    it('returns 401 without an access token, and only the caller’s spend', async () => {
      await client.request.get('/api/billing/spend').expect(401);
      await client.request.get('/api/billing/spend').set('X-Access-Token', 'not-a-token').expect(401);
      await post(conversationInfo(randomUUID(), at(100), { agent: [CLAUDE, 0.05] })).expect(201);
      const other = await createUserFixture();
      expect(await spend('', other)).to.deep.equal({
        group_by: 'conversation',
        since: null,
        until: null,
        total_usd: 0,
        total_micro_usd: 0,
        entry_count: 0,
        group_count: 0,
        items: [],
        limit: 50,
        offset: 0,
        next_offset: null,
      });
      expect((await spend('')).total_micro_usd).to.equal(50_000);
    });

    it('groups by UTC day, newest first, within [since, until)', async () => {
      const days = [
        ['2026-11-20T23:59:59.999Z', 0.01],
        ['2026-11-21T00:00:00.000Z', 0.02],
        ['2026-11-21T12:00:00.000Z', 0.04],
        ['2026-11-22T08:00:00.000Z', 0.08],
      ] as const;
      for (const [instant, cost] of days) {
        const id = randomUUID();
        await post(conversationInfo(id, at(100), { agent: [CLAUDE, cost] })).expect(201);
        await chargedAt(id, instant);
      }
      const all = await spend('group_by=day');
      expect(all.items.map((row: Info) => [row.day, row.amount_micro_usd, row.entry_count])).to.deep.equal([
        ['2026-11-22', 80_000, 1],
        ['2026-11-21', 60_000, 2],
        ['2026-11-20', 10_000, 1],
      ]);
      expect(all.items[1]).to.include({ first_charged_at: '2026-11-21T00:00:00.000Z', last_charged_at: '2026-11-21T12:00:00.000Z' });

      const range = await spend(`group_by=day&since=${encodeURIComponent('2026-11-21T01:00:00+01:00')}&until=2026-11-22T08:00:00Z`);
      expect(range).to.include({ since: '2026-11-21T00:00:00.000Z', until: '2026-11-22T08:00:00.000Z', total_micro_usd: 60_000, entry_count: 2, group_count: 1 });
      expect(range.items.map((row: Info) => row.day)).to.deep.equal(['2026-11-21']);
    });

    it('pages the groups with limit and offset; next_offset is null on the last page', async () => {
      for (const cost of [0.01, 0.02, 0.03]) await post(conversationInfo(randomUUID(), at(100), { agent: [CLAUDE, cost] })).expect(201);
      const first = await spend('limit=2');
      expect(first).to.include({ limit: 2, offset: 0, next_offset: 2, group_count: 3, total_micro_usd: 60_000 });
      const second = await spend('limit=2&offset=2');
      expect(second).to.include({ offset: 2, next_offset: null });
      expect(second.items).to.have.length(1);
      const beyond = await spend('limit=2&offset=10');
      expect(beyond).to.include({ next_offset: null, total_micro_usd: 60_000 });
      expect(beyond.items).to.deep.equal([]);
      // Most recently charged first: the third conversation leads.
      expect(first.items[0].amount_micro_usd).to.equal(30_000);
    });

    it('orders conversations by amount, largest first, with order=amount (paged the same way)', async () => {
      const ids = [randomUUID(), randomUUID(), randomUUID()];
      for (const [i, cost] of [0.02, 0.05, 0.01].entries()) await post(conversationInfo(ids[i]!, at(100), { agent: [CLAUDE, cost] })).expect(201);
      const first = await spend('order=amount&limit=2');
      expect(first.items.map((row: Info) => [row.conversation_id, row.amount_micro_usd])).to.deep.equal([
        [ids[1], 50_000],
        [ids[0], 20_000],
      ]);
      expect(first).to.include({ next_offset: 2 });
      expect((await spend('order=amount&limit=2&offset=2')).items.map((row: Info) => row.conversation_id)).to.deep.equal([ids[2]]);
    });

    const badQueries: [string, (string | number)[]][] = [
      ['group_by=user', ['query', 'group_by']],
      ['limit=0', ['query', 'limit']],
      ['limit=101', ['query', 'limit']],
      ['offset=-1', ['query', 'offset']],
      ['offset=100001', ['query', 'offset']],
      ['order=cheapest', ['query', 'order']],
      ['since=yesterday', ['query', 'since']],
      ['until=2026-11-21', ['query', 'until']],
      ['since=2026-11-22T00:00:00Z&until=2026-11-22T00:00:00Z', ['query', 'until']],
      ['since=2026-11-23T00:00:00Z&until=2026-11-22T00:00:00Z', ['query', 'until']],
    ];
    for (const [query, loc] of badQueries) {
      it(`returns 422 naming ${loc.join('.')} for ${query}`, async () => {
        const response = await client.request.get(`/api/billing/spend?${query}`).set('X-Access-Token', user.accessToken).expect(422);
        expect(response.body.detail.map((d: Info) => d.loc)).to.deep.include(loc);
      });
    }
  });
});

describe('spend ledger across two server instances on one database', function () {
  this.timeout(120_000);
  let user: UserFixture;
  let servers: ServerProcess[];

  before(async () => {
    user = await createUserFixture();
    const start = () => startServerProcess({ ...process.env, DATABASE_URL: testDatabase().url, LOG_LEVEL: 'info', CREDENTIAL_CACHE_TTL_MS: '0' });
    servers = await Promise.all([start(), start()]);
  });
  beforeEach(async () => {
    user = await createUserFixture();
  });
  after(async () => {
    await killAllProcesses();
  });

  it('charges exactly the increase, once, when growing, repeated and reordered posts race through both', async () => {
    const id = randomUUID();
    const posts: Info[] = [];
    for (let k = 1; k <= 20; k++) {
      // Costs as exact decimals (k × 0.0101 and k × 0.0007 dollars); each post sent three times.
      const info = conversationInfo(id, at(k), { agent: [CLAUDE, (k * 10_100) / 1e6], condenser: [MINI, (k * 700) / 1e6] });
      posts.push(info, info, info);
    }
    // A fixed shuffle, so that a failure can be replayed.
    let seed = 23;
    const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
    for (let i = posts.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [posts[i], posts[j]] = [posts[j]!, posts[i]!];
    }
    const statuses = await Promise.all(
      posts.map(async (info, i) => {
        const response = await fetch(`${servers[i % 2]!.baseUrl}/api/v1/webhooks/conversations`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', 'X-Session-API-Key': user.sessionApiKey },
          body: JSON.stringify(info),
        });
        await response.arrayBuffer();
        return response.status;
      }),
    );
    expect(statuses.filter((status) => status !== 200 && status !== 201), servers.map(describeRun).join('\n')).to.deep.equal([]);
    expect(statuses.filter((status) => status === 201)).to.have.length(1);

    const rows = await testDatabase()
      .orm.em.getConnection()
      .execute<{ usage_id: string; total: string; smallest: string }[]>(
        `select usage_id, sum(amount_micro_usd)::text as total, min(amount_micro_usd)::text as smallest
         from spend_entries where conversation_id = ? group by usage_id order by usage_id`,
        [id],
      );
    expect(rows.map((row) => [row.usage_id, Number(row.total)])).to.deep.equal([
      ['agent', 202_000],
      ['condenser', 14_000],
    ]);
    expect(rows.every((row) => Number(row.smallest) > 0)).to.equal(true);

    const headers = { 'X-Access-Token': user.accessToken };
    const credits = (await (await fetch(`${servers[0]!.baseUrl}/api/billing/credits`, { headers })).json()) as Info;
    const byModel = (await (await fetch(`${servers[1]!.baseUrl}/api/billing/spend?group_by=model`, { headers })).json()) as Info;
    expect(credits.spent_micro_usd).to.equal(216_000);
    expect(byModel.total_micro_usd).to.equal(216_000);
    expect(byModel.items.map((row: Info) => [row.model_name, row.amount_micro_usd])).to.deep.equal([
      [CLAUDE, 202_000],
      [MINI, 14_000],
    ]);
  });
});
