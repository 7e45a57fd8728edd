/// <reference lib="dom" />
// DOM types for the callbacks that run in the page (page.evaluate).
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { eventsOfEveryKind } from '../fixtures/events.ts';
import { browserSuite, photograph } from '../helpers/browser.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { webhookPath } from '../helpers/webhook.ts';

/**
 * Sharing as people use it, in headless Chromium: the owner creates a link from the viewer, someone
 * signed out opens it, the owner revokes it. Each page is checked with axe-core and photographed at
 * 1280 px, 375 px and in dark.
 */
describe('sharing in a browser (headless Chromium)', function () {
  this.timeout(120_000);
  const suite = browserSuite();
  let owner: UserFixture;

  beforeEach(async () => {
    owner = await createUserFixture();
  });

  async function post(url: string, body: unknown): Promise<void> {
    const response = await fetch(`${suite.baseUrl}${url}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Session-API-Key': owner.sessionApiKey },
      body: JSON.stringify(body),
    });
    expect(response.status, await response.clone().text()).to.be.oneOf([200, 201]);
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
    const ownerPage = await suite.newPage();
    await suite.signIn(ownerPage, owner.accessToken, `#/conversations/${conversationId}`);
    await ownerPage.locator('#share').click();
    await ownerPage.locator('#share-panel').waitFor();
    await ownerPage.locator('#create-share-link').click();
    const url = (await ownerPage.locator('#share-url').textContent())!;
    expect(url).to.match(/^http:\/\/127\.0\.0\.1:\d+\/share\/apsh_[A-Za-z0-9_-]{43}$/);
    await ownerPage.locator('table.share-links tbody tr').first().waitFor();
    expect(await ownerPage.locator('table.share-links tbody tr').count()).to.equal(1);
    await photograph(ownerPage, 'share-panel', { checked: true });

    // Someone signed out, with tracking parameters the link picked up on the way.
    const reader = await suite.newPage();
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
    await photograph(reader, 'share-page', { checked: true });

    // The owner revokes; the reader's next load says so.
    await ownerPage.locator('table.share-links button', { hasText: 'Revoke' }).click();
    await ownerPage.locator('table.share-links button', { hasText: 'Confirm revoke' }).click();
    await ownerPage.locator('table.share-links .badge[data-status="revoked"]').waitFor();
    const gone = await reader.goto(url);
    expect(gone!.status()).to.equal(404);
    await reader.locator('h1', { hasText: 'This link is no longer available' }).waitFor();
    await photograph(reader, 'share-gone', { checked: true });
    expect(suite.errors).to.deep.equal([]);
  });
});
