/// <reference lib="dom" />
import path from 'node:path';
import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { browserSuite, expectAccessible, expectFitsPhone, SCREENSHOTS } from '../helpers/browser.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';

/** The console's webhook endpoint settings in headless Chromium: types, filters, rate limit and headers edited; axe, 1280 and 375 px. */
describe('console in a browser: editing a webhook endpoint', function () {
  this.timeout(120_000);
  const suite = browserSuite();
  let user: UserFixture;
  let page: Page;

  beforeEach(async () => {
    user = await createUserFixture();
    page = await suite.newPage();
  });

  const endpointOf = async (id: string) =>
    (await fetch(`${suite.baseUrl}/api/v1/webhook-endpoints/${id}`, { headers: { 'X-Access-Token': user.accessToken } })).json();

  it('saves only what changed, keeps a secret header unless the headers are edited, and shows the field the server refused', async () => {
    const headers = { 'Content-Type': 'application/json', 'X-Access-Token': user.accessToken };
    const body = { url: 'https://hooks.example.com/agents', headers: { Authorization: 'Bearer s3cret-receiver-token', 'X-Team': 'platform' } };
    const created = await (await fetch(`${suite.baseUrl}/api/v1/webhook-endpoints`, { method: 'POST', headers, body: JSON.stringify(body) })).json();
    rememberSecret(created.secret);
    rememberSecret('s3cret-receiver-token');

    await suite.signIn(page, user.accessToken, `#/webhook-endpoints/${created.id}`);
    await page.locator('#settings-form').waitFor();
    // The secret header's value is never on the page.
    expect(await page.inputValue('#settings-headers')).to.equal('X-Team: platform\nAuthorization: ');
    expect(await page.content()).not.to.include('s3cret-receiver-token');

    await page.fill('#settings-rate-limit', '25');
    await page.check('#settings-type-conversation\\.created');
    await page.fill('#settings-tags', 'team:platform\nenv:prod');
    await page.click('#settings-form button[type=submit]');
    await page.locator('#settings-message', { hasText: 'Settings saved.' }).waitFor();
    let stored = await endpointOf(created.id);
    expect(stored).to.deep.include({ rate_limit: 25, event_types: ['conversation.created'], tags: ['env:prod', 'team:platform'], conversation_ids: null });
    expect(stored.sensitive_headers).to.deep.equal(['Authorization']);
    expect(stored.headers).to.deep.equal({ 'X-Team': 'platform' });
    await expectAccessible(page);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'endpoint-settings-1280.png'), fullPage: true });
    await expectFitsPhone(page, () => page.screenshot({ path: path.join(SCREENSHOTS, 'endpoint-settings-375.png'), fullPage: true }));

    // Editing the headers without typing the secret one again is stopped before anything is sent.
    await page.fill('#settings-headers', 'X-Team: agents\nAuthorization: ');
    await page.click('#settings-form button[type=submit]');
    await page.locator('#settings-message', { hasText: 'Give the value of Authorization' }).waitFor();
    expect((await endpointOf(created.id)).headers).to.deep.equal({ 'X-Team': 'platform' });

    // What the server refuses (a tag without a key) is named, and nothing changes.
    await page.fill('#settings-headers', 'X-Team: platform\nAuthorization: ');
    await page.fill('#settings-tags', 'platform');
    await page.click('#settings-form button[type=submit]');
    await page.locator('#settings-message .notice.error', { hasText: 'tags' }).waitFor();
    expect((await endpointOf(created.id)).tags).to.deep.equal(['env:prod', 'team:platform']);

    // Emptying a filter sends null ("any"); unticking every type sends every type.
    await page.fill('#settings-tags', '');
    await page.uncheck('#settings-type-conversation\\.created');
    await page.fill('#settings-rate-limit', '');
    await page.uncheck('#settings-enabled');
    await page.click('#settings-form button[type=submit]');
    await page.locator('#settings-message', { hasText: 'Settings saved.' }).waitFor();
    stored = await endpointOf(created.id);
    expect(stored).to.deep.include({ rate_limit: null, event_types: null, tags: null, disabled: true });
    expect(stored.sensitive_headers).to.deep.equal(['Authorization']);
    expect(suite.errors).to.deep.equal([]);
  });
});
