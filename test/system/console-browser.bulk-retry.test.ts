/// <reference lib="dom" />
import path from 'node:path';
import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { browserSuite, expectAccessible, expectFitsPhone, SCREENSHOTS } from '../helpers/browser.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';

/** The console's webhook endpoint page in headless Chromium: the message log's filters and "Retry these"; axe, 1280 and 375 px. */
describe('console in a browser: retrying a filtered message list', function () {
  this.timeout(120_000);
  const suite = browserSuite();
  let user: UserFixture;
  let page: Page;

  beforeEach(async () => {
    user = await createUserFixture();
    page = await suite.newPage();
  });

  it('filters the log by state, asks before "Retry these", starts one bulk retry of that filter and shows its progress', async () => {
    const baseUrl = suite.baseUrl;
    const headers = { 'Content-Type': 'application/json', 'X-Access-Token': user.accessToken };
    const created = await (await fetch(`${baseUrl}/api/v1/webhook-endpoints`, { method: 'POST', headers, body: JSON.stringify({ url: 'https://hooks.example.com/ops' }) })).json();
    rememberSecret(created.secret);
    const sent: { id: string }[] = [];
    for (let i = 0; i < 3; i++) sent.push(await (await fetch(`${baseUrl}/api/v1/webhook-endpoints/${created.id}/test`, { method: 'POST', headers })).json());
    // No worker runs here: two messages failed in a receiver's outage (its answer is hostile text), one succeeded.
    const sql = testDatabase().orm.em.getConnection();
    const hostile = '<img src=x onerror="window.__owned=1">down';
    await sql.execute(`update webhook_deliveries set state = 'failed', attempts = 1, last_status_code = 503, last_error = ? where message_id in (?, ?)`, [hostile, sent[0]!.id, sent[2]!.id]);
    await sql.execute(`update webhook_deliveries set state = 'succeeded', attempts = 1, last_status_code = 200 where message_id = ?`, [sent[1]!.id]);

    await suite.signIn(page, user.accessToken, `#/webhook-endpoints/${created.id}`);
    await page.locator('#endpoint-messages tbody tr').nth(2).waitFor();
    await page.locator('#log-type option[value="webhook.test"]').waitFor({ state: 'attached' });
    await page.selectOption('#log-status', 'failed');
    await page.selectOption('#log-type', 'webhook.test');
    await page.click('#log-filters button[type=submit]');
    await page.waitForFunction(() => document.querySelectorAll('#endpoint-messages tbody tr').length === 2);
    expect(await page.locator('#endpoint-messages').innerText()).to.include(hostile);
    expect(await page.evaluate(() => (window as unknown as { __owned?: number }).__owned)).to.equal(undefined);

    await page.click('#retry-these button:has-text("Retry these")');
    const confirm = page.locator('#retry-these button.confirm');
    expect(await confirm.innerText()).to.include('Retry every failed message this filter selects');
    await expectAccessible(page);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'bulk-retry-confirm-1280.png'), fullPage: true });
    await confirm.click();
    await page.locator('#retry-progress', { hasText: 'Retry running: 0 of 2 sent, 0 accepted.' }).waitFor();
    // Not offered again while the task runs.
    expect(await page.locator('#retry-these button').count()).to.equal(0);

    const tasks = await sql.execute(`select kind, status, event_type, total from webhook_recover_tasks where endpoint_id = ?`, [created.id]);
    expect(tasks).to.deep.equal([{ kind: 'retry', status: 'failed', event_type: 'webhook.test', total: 2 }]);
    await expectAccessible(page);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'bulk-retry-1280.png'), fullPage: true });
    await expectFitsPhone(page, () => page.screenshot({ path: path.join(SCREENSHOTS, 'bulk-retry-375.png'), fullPage: true }));

    // Pending messages are being delivered: no retry is offered for them.
    await page.selectOption('#log-status', 'succeeded');
    await page.click('#log-filters button[type=submit]');
    await page.locator('#retry-these button', { hasText: 'Retry these' }).waitFor();
    await page.selectOption('#log-status', 'pending');
    await page.click('#log-filters button[type=submit]');
    await page.locator('#endpoint-messages + p, p.empty', { hasText: 'No message matches this filter.' }).waitFor();
    expect(suite.errors).to.deep.equal([]);
  });
});
