/// <reference lib="dom" />
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { expect } from 'chai';
import type { Browser, Page } from 'playwright-core';
import { buildConsole } from '../../src/console/bundle.ts';
import { launchBrowserOrSkip } from '../helpers/browser.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { listenTestApp } from '../helpers/app.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';

const require = createRequire(import.meta.url);
const AXE_SOURCE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const SCREENSHOTS = path.join(import.meta.dirname, '..', '..', 'test-results', 'screenshots');

/** The console's webhook endpoint page in headless Chromium: the message log's filters and "Retry these"; axe, 1280 and 375 px. */
describe('console in a browser: retrying a filtered message list', function () {
  this.timeout(120_000);
  let browser: Browser;
  let listening: Awaited<ReturnType<typeof listenTestApp>> | undefined;
  let user: UserFixture;
  let page: Page;
  const pageErrors: string[] = [];

  before(async function () {
    browser = await launchBrowserOrSkip(this);
    await buildConsole();
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    listening = await listenTestApp();
  });
  after(async () => {
    await browser?.close();
    await listening?.liveStreams.close();
    await listening?.close();
  });
  beforeEach(async () => {
    user = await createUserFixture();
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    pageErrors.length = 0;
    page.on('pageerror', (error) => pageErrors.push(String(error)));
    page.on('console', (message) => message.type() === 'error' && !message.text().startsWith('Failed to load resource') && pageErrors.push(message.text()));
  });
  afterEach(async () => {
    await page?.close();
  });

  async function expectAccessible(): Promise<void> {
    await page.evaluate(AXE_SOURCE);
    const violations = await page.evaluate(async () => {
      const axe = (globalThis as unknown as { axe: { run: (context: unknown, options: unknown) => Promise<{ violations: { id: string; nodes: { target: unknown }[] }[] }> } }).axe;
      const result = await axe.run(document, { resultTypes: ['violations'] });
      return result.violations.map((violation) => `${violation.id}: ${violation.nodes.map((node) => JSON.stringify(node.target)).join(', ')}`);
    });
    expect(violations).to.deep.equal([]);
  }

  it('filters the log by state, asks before "Retry these", starts one bulk retry of that filter and shows its progress', async () => {
    const baseUrl = listening!.baseUrl;
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

    await page.goto(`${baseUrl}/#/webhook-endpoints/${created.id}`);
    await page.fill('#token', user.accessToken);
    await page.click('#sign-in button[type=submit]');
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
    await expectAccessible();
    await page.screenshot({ path: path.join(SCREENSHOTS, 'bulk-retry-confirm-1280.png'), fullPage: true });
    await confirm.click();
    await page.locator('#retry-progress', { hasText: 'Retry running: 0 of 2 sent, 0 accepted.' }).waitFor();
    // Not offered again while the task runs.
    expect(await page.locator('#retry-these button').count()).to.equal(0);

    const tasks = await sql.execute(`select kind, status, event_type, total from webhook_recover_tasks where endpoint_id = ?`, [created.id]);
    expect(tasks).to.deep.equal([{ kind: 'retry', status: 'failed', event_type: 'webhook.test', total: 2 }]);
    await expectAccessible();
    await page.screenshot({ path: path.join(SCREENSHOTS, 'bulk-retry-1280.png'), fullPage: true });
    await page.setViewportSize({ width: 375, height: 760 });
    await page.waitForTimeout(150);
    const widths = await page.evaluate(() => ({ document: document.documentElement.scrollWidth, viewport: window.innerWidth }));
    expect(widths.document).to.equal(widths.viewport);
    await expectAccessible();
    await page.screenshot({ path: path.join(SCREENSHOTS, 'bulk-retry-375.png'), fullPage: true });

    // Pending messages are being delivered: no retry is offered for them.
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.selectOption('#log-status', 'succeeded');
    await page.click('#log-filters button[type=submit]');
    await page.locator('#retry-these button', { hasText: 'Retry these' }).waitFor();
    await page.selectOption('#log-status', 'pending');
    await page.click('#log-filters button[type=submit]');
    await page.locator('#endpoint-messages + p, p.empty', { hasText: 'No message matches this filter.' }).waitFor();
    expect(pageErrors).to.deep.equal([]);
  });
});
