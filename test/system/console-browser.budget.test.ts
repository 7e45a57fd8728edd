/// <reference lib="dom" />
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { generateSecret, hashSecret } from '../../src/identity/secrets.ts';
import { browserSuite, expectAccessible, photograph } from '../helpers/browser.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';

/** The console's budget in headless Chromium: the banner, spend per member, the budget card and its form; axe, 1280 and 375 px, dark. */
describe('console in a browser: the budget', function () {
  this.timeout(120_000);
  const suite = browserSuite();
  let owner: UserFixture;
  let page: Page;

  beforeEach(async () => {
    owner = await createUserFixture({ email: `owner-${randomUUID().slice(0, 8)}@example.com` });
    page = await suite.newPage();
  });

  /** A second member of the owner's organization, with a session API key made there. */
  async function addMember(email: string): Promise<string> {
    const user = await createUserFixture({ email });
    const connection = testDatabase().orm.em.getConnection();
    await connection.execute('insert into organization_members (org_id, user_id, role) values (?, ?, ?)', [owner.orgId, user.userId, 'member']);
    const key = generateSecret('session_api_key');
    rememberSecret(key);
    await connection.execute('insert into credentials (id, user_id, kind, secret_hash, org_id) values (?, ?, ?, ?, ?)', [randomUUID(), user.userId, 'session_api_key', hashSecret(key), owner.orgId]);
    return key;
  }

  async function report(key: string, cost: number): Promise<void> {
    const response = await fetch(`${suite.baseUrl}/api/v1/webhooks/conversations`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Session-API-Key': key },
      body: JSON.stringify({ id: randomUUID(), title: 'A task', stats: { usage_to_metrics: { agent: { model_name: 'anthropic/claude-sonnet-4-5', accumulated_cost: cost } } } }),
    });
    expect(response.status, await response.clone().text()).to.equal(201);
  }

  async function putBudget(body: object): Promise<void> {
    const response = await fetch(`${suite.baseUrl}/api/orgs/${owner.orgId}/budget`, {
      method: 'PUT',
      headers: { 'Content-Type': 'application/json', 'X-Access-Token': owner.accessToken },
      body: JSON.stringify(body),
    });
    expect(response.status, await response.clone().text()).to.equal(200);
  }

  it('shows the banner past a threshold, spend per member, the budget with its thresholds, and changes it', async () => {
    const memberEmail = `grace-${randomUUID().slice(0, 8)}@example.com`;
    const memberKey = await addMember(memberEmail);
    await putBudget({ monthly_limit_usd: 10, member_monthly_limit_usd: 6, alert_thresholds: [50, 80, 100] });
    await report(owner.sessionApiKey, 5.25);
    await report(memberKey, 3.1);

    await suite.signIn(page, owner.accessToken);
    const banner = page.locator('#budget-banner');
    await banner.waitFor();
    expect(await banner.textContent()).to.include("This organization's spend").and.include('has passed 80 % of its monthly budget of $10.00');
    expect(await banner.textContent()).to.include('Your own spend').and.include('has passed 80 % of your monthly budget of $6.00');

    await page.click('nav a[href="#/account"]');
    await page.locator('#budget-members').waitFor();
    expect(await page.locator('#budget-spend').textContent()).to.equal('$8.35');
    expect(await page.locator('#budget-share').textContent()).to.equal('83 % of $10.00');
    expect(await page.locator('#budget-thresholds').textContent()).to.equal('50 %, 80 %, 100 %');
    expect(await page.locator('#budget-members tbody td.title').allTextContents()).to.deep.equal([owner.email, memberEmail]);
    expect(await page.locator('#budget-members tbody td.num').allTextContents()).to.deep.equal(['$5.25', '87 %', '$3.10', '51 %']);
    await page.selectOption('#spend-group', 'member');
    await page.waitForFunction(() => document.querySelector('#spend caption')?.textContent?.includes('member'));
    expect(await page.locator('#spend tbody td:first-child').allTextContents()).to.deep.equal([owner.email, memberEmail]);
    await page.click('.budget-edit > summary');
    await expectAccessible(page);
    await page.locator('#budget').scrollIntoViewIfNeeded();
    await photograph(page, 'budget', { checked: true });

    // A change the API refuses says why; one it takes is shown.
    await page.fill('#budget-thresholds-input', '90, 50');
    await page.click('#budget-form button[type=submit]');
    await page.locator('#budget-form .notice.error').waitFor();
    expect(await page.locator('#budget-form .notice.error').textContent()).to.include('alert_thresholds');
    await page.fill('#budget-limit-input', '20');
    await page.fill('#budget-member-limit-input', '');
    await page.fill('#budget-thresholds-input', '50, 90');
    await page.click('#budget-form button[type=submit]');
    await page.locator('#budget .notice:has-text("Budget saved.")').waitFor();
    expect(await page.locator('#budget-limit').textContent()).to.equal('$20.00');
    expect(await page.locator('#budget-member-limit').textContent()).to.equal('None');
    expect(await page.locator('#budget-thresholds').textContent()).to.equal('50 %, 90 %');
    // 8.35 of 20 is below 50 %: no banner on the next page.
    await page.click('nav a[href="#/conversations"]');
    await page.waitForTimeout(300);
    expect(await page.locator('#budget-banner').count()).to.equal(0);
    expect(suite.errors).to.deep.equal([]);
  });

  it('offers no form to those who cannot change the budget (a viewer)', async () => {
    await putBudget({ monthly_limit_usd: 10, alert_thresholds: [50] });
    await testDatabase().orm.em.getConnection().execute(`update organization_members set role = 'viewer' where org_id = ? and user_id = ?`, [owner.orgId, owner.userId]);
    await suite.signIn(page, owner.accessToken, '#/account');
    await page.locator('#budget-members').waitFor();
    expect(await page.locator('#budget-form').count()).to.equal(0);
    expect(await page.locator('#budget').textContent()).to.include('Owners and admins of the organization can change the budget.');
    expect(await page.locator('#budget-limit').textContent()).to.equal('$10.00');
    expect(suite.errors).to.deep.equal([]);
  });

  it('says when spending is over budget', async () => {
    await putBudget({ monthly_limit_usd: 2, alert_thresholds: [100] });
    await report(owner.sessionApiKey, 2.5);
    await suite.signIn(page, owner.accessToken, '#/account');
    await page.locator('#budget-members').waitFor();
    expect(await page.locator('#budget-banner').textContent()).to.include('Budget reached.');
    expect(await page.locator('#budget .notice.error').textContent()).to.equal("The organization's monthly budget is used up: $2.50 spent of $2.00 in " + new Date().toISOString().slice(0, 7) + '.');
    await photograph(page, 'budget-over', { checked: true });
    expect(suite.errors).to.deep.equal([]);
  });
});
