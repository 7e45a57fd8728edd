/// <reference lib="dom" />
// DOM types for the callbacks that run in the page (page.evaluate).
import fs from 'node:fs';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { createRequire } from 'node:module';
import { expect } from 'chai';
import type { Browser, Page } from 'playwright-core';
import { buildConsole } from '../../src/console/bundle.ts';
import { eventsOfEveryKind } from '../fixtures/events.ts';
import { launchBrowserOrSkip } from '../helpers/browser.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { listenTestApp } from '../helpers/app.ts';
import { webhookPath } from '../helpers/webhook.ts';

const require = createRequire(import.meta.url);
const AXE_SOURCE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const SCREENSHOTS = path.join(import.meta.dirname, '..', '..', 'test-results', 'screenshots');

/**
 * Sharing as people use it, in headless Chromium: the owner creates a link from the viewer, someone
 * signed out opens it, the owner revokes it. Each page is checked with axe-core and photographed at
 * 1280 px, 375 px and in dark.
 */
describe('sharing in a browser (headless Chromium)', function () {
  this.timeout(120_000);
  let browser: Browser;
  let listening: Awaited<ReturnType<typeof listenTestApp>> | undefined;
  let baseUrl: string;
  let owner: UserFixture;
  const pageErrors: string[] = [];

  before(async function () {
    browser = await launchBrowserOrSkip(this);
    await buildConsole();
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    listening = await listenTestApp();
    baseUrl = listening.baseUrl;
  });
  after(async () => {
    await browser?.close();
    if (listening) await listening.liveStreams.close();
    await listening?.close();
  });
  beforeEach(async () => {
    owner = await createUserFixture();
    pageErrors.length = 0;
  });

  /** A page in a context of its own (no session of another), whose script errors and CSP violations are collected. */
  async function newPage(): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    page.on('pageerror', (error) => pageErrors.push(String(error)));
    page.on('console', (message) => message.type() === 'error' && !message.text().startsWith('Failed to load resource') && pageErrors.push(message.text()));
    return page;
  }

  async function post(url: string, body: unknown): Promise<void> {
    const response = await fetch(`${baseUrl}${url}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Session-API-Key': owner.sessionApiKey },
      body: JSON.stringify(body),
    });
    expect(response.status, await response.clone().text()).to.be.oneOf([200, 201]);
  }

  async function expectAccessible(page: Page): Promise<void> {
    await page.evaluate(AXE_SOURCE);
    const violations = await page.evaluate(async () => {
      const axe = (globalThis as unknown as { axe: { run: (context: unknown, options: unknown) => Promise<{ violations: { id: string; nodes: { target: unknown }[] }[] }> } }).axe;
      const result = await axe.run(document, { resultTypes: ['violations'] });
      return result.violations.map((violation) => `${violation.id}: ${violation.nodes.map((node) => JSON.stringify(node.target)).join(', ')}`);
    });
    expect(violations).to.deep.equal([]);
  }

  /** Screenshots at 1280 px, dark, and 375 px (where nothing may overflow sideways, and axe must pass too). */
  async function photograph(page: Page, name: string): Promise<void> {
    await page.screenshot({ path: path.join(SCREENSHOTS, `${name}-1280.png`), fullPage: true });
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.screenshot({ path: path.join(SCREENSHOTS, `${name}-1280-dark.png`) });
    await expectAccessible(page);
    await page.emulateMedia({ colorScheme: 'light' });
    await page.setViewportSize({ width: 375, height: 760 });
    await page.waitForTimeout(150);
    const widths = await page.evaluate(() => ({ document: document.documentElement.scrollWidth, viewport: window.innerWidth }));
    expect(widths.document, `document width at 375 px (${page.url()})`).to.equal(widths.viewport);
    await expectAccessible(page);
    await page.screenshot({ path: path.join(SCREENSHOTS, `${name}-375.png`), fullPage: true });
    await page.setViewportSize({ width: 1280, height: 800 });
  }

  it('the owner shares from the viewer; signed out, the link shows the read-only viewer without hidden events; revoked, it says so', async () => {
    const conversationId = randomUUID();
    await post(webhookPath(conversationId), eventsOfEveryKind().filter((event) => event.kind !== 'StreamingDeltaEvent'));
    await post('/api/v1/webhooks/conversations', {
      id: conversationId,
      title: 'List the repository files',
      execution_status: 'finished',
      metrics: { model_name: 'anthropic/claude-sonnet-4-5', accumulated_cost: 0.0123, accumulated_token_usage: { prompt_tokens: 1200, completion_tokens: 300 } },
    });

    // The owner: viewer → Share → Create link.
    const ownerPage = await newPage();
    await ownerPage.goto(`${baseUrl}/#/conversations/${conversationId}`);
    await ownerPage.fill('#token', owner.accessToken);
    await ownerPage.click('#sign-in button[type=submit]');
    await ownerPage.locator('#share').click();
    await ownerPage.locator('#share-panel').waitFor();
    await ownerPage.locator('#create-share-link').click();
    const url = (await ownerPage.locator('#share-url').textContent())!;
    expect(url).to.match(/^http:\/\/127\.0\.0\.1:\d+\/share\/apsh_[A-Za-z0-9_-]{43}$/);
    await ownerPage.locator('table.share-links tbody tr').first().waitFor();
    expect(await ownerPage.locator('table.share-links tbody tr').count()).to.equal(1);
    await photograph(ownerPage, 'share-panel');

    // Someone signed out, with tracking parameters the link picked up on the way.
    const reader = await newPage();
    const response = await reader.goto(`${url}?utm_source=chat&utm_medium=link`);
    expect(response!.status()).to.equal(200);
    expect(response!.headers()['x-robots-tag']).to.include('noindex');
    await reader.locator('#conversation-title', { hasText: 'List the repository files' }).waitFor();
    await reader.locator('.row[data-kind="MessageEvent"]').first().waitFor();
    const kinds = await reader.locator('.row[data-kind]').evaluateAll((rows) => rows.map((row) => (row as HTMLElement).dataset.kind));
    for (const hidden of ['SystemPromptEvent', 'TokenEvent', 'LLMCompletionLogEvent', 'ConversationStateUpdateEvent']) expect(kinds).to.not.include(hidden);
    expect(kinds).to.include('ActionEvent');
    expect(await reader.locator('.card[data-card="terminal"]').count(), 'the console\'s own cards').to.be.greaterThan(0);
    // Nothing leads into the console: no navigation, no sign-in, no link but the page's own events.
    expect(await reader.locator('.topbar nav, #token, #sign-out').count()).to.equal(0);
    const hrefs = await reader.locator('a[href]').evaluateAll((links) => links.map((link) => link.getAttribute('href')));
    for (const href of hrefs) expect(href).to.match(/^#events\/\d+$/);
    expect(await reader.locator('meta[name="robots"]').getAttribute('content')).to.include('noindex');
    expect(await reader.textContent('body')).to.not.include(owner.email);
    await reader.keyboard.press('k');
    expect(await reader.locator('.row.current').count(), 'j / k move between steps').to.equal(1);
    await photograph(reader, 'share-page');

    // The owner revokes; the reader's next load says so.
    await ownerPage.locator('table.share-links button', { hasText: 'Revoke' }).click();
    await ownerPage.locator('table.share-links button', { hasText: 'Confirm revoke' }).click();
    await ownerPage.locator('table.share-links .badge[data-status="revoked"]').waitFor();
    const gone = await reader.goto(url);
    expect(gone!.status()).to.equal(404);
    await reader.locator('h1', { hasText: 'This link is no longer available' }).waitFor();
    await photograph(reader, 'share-gone');
    expect(pageErrors).to.deep.equal([]);
  });
});
