/// <reference lib="dom" />
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { browserSuite, expectAccessible, photograph } from '../helpers/browser.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { usageRollupsBackfill } from '../../src/db/migrations/Migration20261127136000_usage_rollups.ts';
import { usageMemberRollupsBackfill } from '../../src/db/migrations/Migration20261127211000_usage_members.ts';

const DAY_MS = 86_400_000;

/** The console's Usage page in headless Chromium: charts, tables, the period switch, links to the viewer; axe, 1280 and 375 px, dark. */
describe('console in a browser: the Usage page', function () {
  this.timeout(120_000);
  const suite = browserSuite();
  let user: UserFixture;
  let page: Page;

  beforeEach(async () => {
    user = await createUserFixture();
    page = await suite.newPage();
  });

  /** Posts a conversation's info as the agent-server does: one usage per model with its cost (USD), tokens and calls. */
  async function info(who: UserFixture, conversationId: string, title: string, usages: [model: string, cost: number, tokensIn: number, tokensOut: number, calls: number][]) {
    const usageToMetrics = Object.fromEntries(
      usages.map(([model, cost, tokensIn, tokensOut, calls], n) => [
        n === 0 ? 'agent' : `usage-${n}`,
        {
          model_name: model,
          accumulated_cost: cost,
          accumulated_token_usage: { model, prompt_tokens: tokensIn, completion_tokens: tokensOut },
          token_usages: Array.from({ length: calls }, () => ({ model, prompt_tokens: 1, completion_tokens: 1 })),
        },
      ]),
    );
    const response = await fetch(`${suite.baseUrl}/api/v1/webhooks/conversations`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Session-API-Key': who.sessionApiKey },
      body: JSON.stringify({ id: conversationId, title, execution_status: 'finished', metrics: null, stats: { usage_to_metrics: usageToMetrics } }),
    });
    expect(response.status, await response.clone().text()).to.be.oneOf([200, 201]);
  }

  /** As if the conversation's infos had arrived `days` ago (the ledger and usage alike). */
  async function receivedDaysAgo(conversationId: string, days: number): Promise<void> {
    const connection = testDatabase().orm.em.getConnection();
    await connection.execute(`update spend_entries set charged_at = charged_at - make_interval(days => ?) where conversation_id = ?`, [days, conversationId]);
    await connection.execute(`update usage_daily set day = day - ? where conversation_id = ?`, [days, conversationId]);
    await connection.execute(usageRollupsBackfill() + usageMemberRollupsBackfill());
  }

  it('charts cost and tokens per day, lists the top models, members and conversations, and switches between 7, 30 and 90 days', async () => {
    const hostile = '<img src=x onerror="window.__owned=1">Refactor the parser';
    const [parser, billing, old] = [randomUUID(), randomUUID(), randomUUID()];
    await info(user, parser, hostile, [['anthropic/claude-sonnet-4-5', 1.234567, 812_000, 41_000, 37], ['openai/gpt-4o-mini', 0.0042, 90_000, 3_000, 12]]);
    await info(user, billing, 'Fix the billing export', [['anthropic/claude-sonnet-4-5', 0.5, 300_000, 12_000, 15]]);
    await info(user, old, 'An older task', [['openai/gpt-5', 2.75, 1_500_000, 60_000, 80]]);
    for (let n = 0; n < 12; n++) {
      const id = randomUUID();
      await info(user, id, `Daily task ${n}`, [['anthropic/claude-sonnet-4-5', 0.05 * ((n % 5) + 1), 40_000 * ((n % 4) + 1), 2_000 * ((n % 3) + 1), 3 + n]]);
      await receivedDaysAgo(id, 2 + n * 2);
    }
    await receivedDaysAgo(billing, 3);
    await receivedDaysAgo(old, 45); // only in the 90-day view
    const someoneElse = await createUserFixture();
    await info(someoneElse, randomUUID(), 'Not yours', [['secret/model', 99, 1, 1, 1]]);

    await suite.signIn(page, user.accessToken);
    await page.click('nav a[href="#/usage"]');
    await page.locator('#usage-total').waitFor();
    expect(page.url()).to.match(/#\/usage\?days=30$/);

    const api = async (query: string) => (await (await fetch(`${suite.baseUrl}/api/billing/usage?${query}`, { headers: { 'X-Access-Token': user.accessToken } })).json()) as { totals: { cost_usd: number; cost_micro_usd: number } };
    const since30 = new Date(Math.floor(Date.now() / DAY_MS) * DAY_MS - 29 * DAY_MS).toISOString().slice(0, 10);
    const month = await api(`since=${since30}`);
    expect(await page.locator('#usage-total .money').getAttribute('title')).to.equal(`${month.totals.cost_micro_usd.toLocaleString('en-US')} micro-dollars`);
    expect(await page.locator('#usage-total').textContent()).to.equal(`$${month.totals.cost_usd.toFixed(2)}`);
    // One bar slot per day, each with its numbers on hover; the same numbers in the table.
    expect(await page.locator('#usage-chart-cost g.day').count()).to.equal(30);
    expect(await page.locator('#usage-chart-tokens g.day').count()).to.equal(30);
    const today = page.locator('#usage-chart-cost g.day').last().locator('title');
    expect(await today.textContent()).to.match(/: \$1\.24, 902,000 tokens in, 44,000 tokens out, 1 conversation, 49 LLM calls$/);
    expect(await page.locator('#usage-days tbody tr').count()).to.equal(30);
    expect(await page.locator('#usage-models tbody tr td.title').allTextContents()).to.deep.equal(['anthropic/claude-sonnet-4-5', 'openai/gpt-4o-mini']);
    expect(await page.locator('#usage-members tbody tr td.title').allTextContents()).to.deep.equal([user.email]);
    // The hostile title is text, and its row opens the conversation's viewer.
    const top = page.locator('#usage-conversations tbody tr a').first();
    expect(await top.textContent()).to.equal(hostile);
    expect(await top.getAttribute('href')).to.equal(`#/conversations/${parser}`);
    expect(await page.locator('#usage img').count()).to.equal(0);
    expect(await page.locator('body').textContent()).not.to.include('Not yours');
    await expectAccessible(page);
    await page.locator('#usage-chart-cost g.day').last().hover();
    await photograph(page, 'usage', { checked: true });

    await page.click('.segmented button:has-text("90 days")');
    await page.waitForFunction(() => document.querySelectorAll('#usage-chart-cost g.day').length === 90);
    expect(await page.locator('.segmented button[aria-pressed="true"]').textContent()).to.equal('90 days');
    expect(page.url()).to.match(/#\/usage\?days=90$/);
    const quarter = await api(`since=${new Date(Math.floor(Date.now() / DAY_MS) * DAY_MS - 89 * DAY_MS).toISOString().slice(0, 10)}`);
    expect(await page.locator('#usage-total').textContent()).to.equal(`$${quarter.totals.cost_usd.toFixed(2)}`);
    expect(await page.locator('#usage-models tbody tr td.title').allTextContents()).to.include('openai/gpt-5');
    await page.click('.segmented button:has-text("7 days")');
    await page.waitForFunction(() => document.querySelectorAll('#usage-chart-cost g.day').length === 7);
    await page.goBack();
    await page.waitForFunction(() => document.querySelectorAll('#usage-chart-cost g.day').length === 90);

    await page.click(`#usage-conversations a[href="#/conversations/${parser}"]`);
    await page.waitForURL(`**/#/conversations/${parser}`);
    expect(await page.evaluate(() => (window as unknown as { __owned?: number }).__owned)).to.equal(undefined);
    expect(suite.errors).to.deep.equal([]);
  });
});
