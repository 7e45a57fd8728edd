/// <reference lib="dom" />
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { createLogger } from '../../src/logger.ts';
import { SearchIndexer } from '../../src/search/indexer.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { browserSuite, photograph } from '../helpers/browser.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testConfig, testDatabase } from '../helpers/hooks.ts';
import { webhookPath } from '../helpers/webhook.ts';

/** The console's search inside conversations, in headless Chromium: grouped hits, marked matches, opening the viewer. */
describe('console in a browser: search inside conversations', function () {
  this.timeout(120_000);
  const suite = browserSuite();
  let user: UserFixture;
  let page: Page;

  beforeEach(async () => {
    user = await createUserFixture();
    page = await suite.newPage();
  });

  async function post(conversationId: string, events: unknown[], title: string): Promise<void> {
    const base = suite.baseUrl;
    const headers = { 'Content-Type': 'application/json', 'X-Session-API-Key': user.sessionApiKey };
    const response = await fetch(`${base}${webhookPath(conversationId)}`, { method: 'POST', headers, body: JSON.stringify(events) });
    expect(response.status, await response.clone().text()).to.equal(200);
    const info = await fetch(`${base}/api/v1/webhooks/conversations`, { method: 'POST', headers, body: JSON.stringify({ id: conversationId, title, execution_status: 'finished' }) });
    expect(info.status).to.be.oneOf([200, 201]);
  }
  const message = (text: string, source: 'user' | 'agent' = 'agent') =>
    minimalEvent('MessageEvent', { id: randomUUID(), source, llm_message: { role: source === 'user' ? 'user' : 'assistant', content: [{ type: 'text', text }] } });

  it('finds content, groups hits by conversation with marked matches as DOM nodes, and opens the viewer at the event', async () => {
    const upload = randomUUID();
    const parser = randomUUID();
    const hostile = '<img src=x onerror="window.__owned=1"> ECONNRESET <b>bold</b>';
    await post(upload, [
      message('Fix the flaky upload test', 'user'),
      minimalEvent('ObservationEvent', {
        id: randomUUID(),
        observation: { content: [{ type: 'text', text: 'npm test\n  ✗ uploads a file\n    Error: read ECONNRESET\n      at TCP.onStreamRead (node:internal/stream_base_commons:217:20)' }], command: 'npm test', exit_code: 1, kind: 'TerminalObservation' },
      }),
      message('The upload retries once after ECONNRESET now; the test passes.'),
    ], 'Fix the flaky upload test');
    await post(parser, [message(hostile), message('Unrelated: the parser handles empty input')], 'Parser <script>alert(1)</script>');
    await new SearchIndexer(testDatabase().orm.em, testConfig().search, createLogger('silent')).catchUp();

    await suite.signIn(page, user.accessToken);
    await page.fill('#content-q', 'econnreset');
    await page.click('#content-search button[type=submit]');
    await page.locator('#content-results .hit-group').nth(1).waitFor();
    await page.locator('#content-count').filter({ hasText: 'matching' }).waitFor();

    expect(await page.locator('#content-count').textContent()).to.equal('3 matching events');
    const groups = page.locator('#content-results .hit-group');
    expect(await groups.count()).to.equal(2);
    // Newest first: the hostile message was posted last, so its conversation leads.
    expect(await groups.nth(0).locator('h2').textContent()).to.equal('Parser <script>alert(1)</script>');
    expect(await groups.nth(1).locator('h2').textContent()).to.equal('Fix the flaky upload test');
    expect(await groups.nth(1).locator('.hit').count()).to.equal(2);
    expect(await page.locator('#content-results mark').allTextContents()).to.deep.equal(['ECONNRESET', 'ECONNRESET', 'ECONNRESET']);
    expect(await page.locator('#content-results .snippet').first().textContent()).to.equal(hostile);
    expect(await page.locator('#content-results img, #content-results b, #content-results script').count()).to.equal(0);
    expect(await page.evaluate(() => (window as unknown as { __owned?: number }).__owned)).to.equal(undefined);
    expect(await page.locator('#conversations').isVisible()).to.equal(false);
    expect(page.url()).to.include('content=econnreset');
    await photograph(page, 'content-search');

    // The observation's hit opens the viewer at that event.
    await groups.nth(1).locator('.hit').nth(1).click();
    await page.waitForURL(new RegExp(`#/conversations/${upload}/events/2$`));
    await page.getByText('Error: read ECONNRESET').first().waitFor();

    // Find inside the viewer: Next and Previous from the event it opened at.
    await page.fill('#find-q', 'econnreset');
    await page.click('#find-next');
    await page.locator('#find-status').filter({ hasText: '#3' }).waitFor();
    expect(await page.locator('#find-status').textContent()).to.equal('#3 · 2 matches');
    await page.locator('.row.current').filter({ hasText: 'retries once after ECONNRESET' }).waitFor();
    await page.click('#find-previous');
    await page.locator('#find-status').filter({ hasText: '#2' }).waitFor();
    await page.click('#find-previous');
    await page.locator('#find-status').filter({ hasText: 'no earlier one' }).waitFor();
    await page.fill('#find-q', 'zzyzx');
    await page.press('#find-q', 'Enter');
    await page.locator('#find-status').filter({ hasText: 'No match' }).waitFor();
    await page.fill('#find-q', 'upload');
    await page.click('#find-next');
    await page.locator('#find-status').filter({ hasText: '#3' }).waitFor();
    await photograph(page, 'viewer-find');

    // Back to the list: an empty search box shows the conversations again.
    await page.goto(`${suite.baseUrl}/#/conversations?content=${encodeURIComponent('"upload test"')}`);
    await page.locator('#content-results .hit').first().waitFor();
    expect(await page.locator('#content-results mark').allTextContents()).to.deep.equal(['upload test']);
    await page.fill('#content-q', '');
    await page.click('#content-search button[type=submit]');
    await page.locator('#conversations').waitFor();
    expect(await page.locator('#content-results').isVisible()).to.equal(false);
    expect(suite.errors).to.deep.equal([]);
  });
});
