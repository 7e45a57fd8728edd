/// <reference lib="dom" />
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { browserSuite } from '../helpers/browser.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { webhookPath } from '../helpers/webhook.ts';

/** The console's conversation viewer, in headless Chromium, on a server running WEBHOOK_EVENT_COMPATIBILITY=accept-unknown. */
describe('console in a browser: events the contract does not know (accept-unknown)', function () {
  this.timeout(120_000);
  const suite = browserSuite({ app: { webhookEventCompatibility: 'accept-unknown' } });
  let user: UserFixture;
  let page: Page;

  beforeEach(async () => {
    user = await createUserFixture();
    page = await suite.newPage();
  });

  it('shows an unknown kind as a folded raw JSON card with a badge, its content as text, never as HTML', async () => {
    const conversationId = randomUUID();
    const hostile = '<img src=x onerror="window.__owned=1"><script>window.__owned=2</script>';
    const events = [
      { kind: 'ConversationForkedEvent', id: randomUUID(), source: 'environment', note: hostile },
      { kind: 'PauseEvent', id: randomUUID(), source: 'user', reason_code: hostile },
    ];
    const response = await fetch(`${suite.baseUrl}${webhookPath(conversationId)}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Session-API-Key': user.sessionApiKey },
      body: JSON.stringify(events),
    });
    expect(response.status, await response.clone().text()).to.equal(200);
    await suite.signIn(page, user.accessToken);
    await page.goto(`${suite.baseUrl}/#/conversations/${conversationId}`);
    const cards = page.locator('details.card.unrecognized');
    await cards.nth(1).waitFor();
    expect(await cards.count()).to.equal(2);
    expect(await cards.nth(0).locator('.badge').textContent()).to.equal('unrecognized kind');
    expect(await cards.nth(1).locator('.badge').textContent()).to.equal('1 unknown property');
    expect(await cards.nth(1).locator('code.chip').textContent()).to.equal('$.reason_code');
    // Folded: the raw JSON is there as text, shown once the card is opened.
    expect(await cards.nth(0).evaluate((card) => (card as HTMLDetailsElement).open)).to.equal(false);
    await cards.nth(0).locator('summary').click();
    expect(await cards.nth(0).locator('pre').textContent()).to.include('"note": "<img src=x onerror=');
    expect(await page.locator('.scroller img, .scroller script').count()).to.equal(0);
    expect(await page.evaluate(() => (window as unknown as { __owned?: number }).__owned)).to.equal(undefined);
    expect(await page.locator('dl.facts').textContent()).to.include('Unrecognized');
    expect(suite.errors).to.deep.equal([]);
  });
});
