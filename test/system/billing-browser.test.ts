import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { browserSuite } from '../helpers/browser.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';

/** The local checkout as a person uses it: headless Chromium against a real listening server. */
describe('local checkout in a browser (headless Chromium)', function () {
  this.timeout(60_000);
  // A page that fails to load any resource is an error here too.
  const suite = browserSuite({ buildConsole: false, failedLoads: true });
  let user: UserFixture;
  let page: Page;

  beforeEach(async () => {
    user = await createUserFixture();
    page = await suite.newPage();
  });

  async function startCheckout(amount: number): Promise<string> {
    const response = await fetch(`${suite.baseUrl}/api/billing/create-checkout-session`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Access-Token': user.accessToken },
      body: JSON.stringify({ amount }),
    });
    expect(response.status).to.equal(200);
    return ((await response.json()) as { redirect_url: string }).redirect_url;
  }

  async function balance(): Promise<number> {
    const response = await fetch(`${suite.baseUrl}/api/billing/credits`, { headers: { 'X-Access-Token': user.accessToken } });
    return ((await response.json()) as { balance_usd: number }).balance_usd;
  }

  it('Confirm payment credits the balance and shows the payment as completed', async () => {
    const redirectUrl = await startCheckout(42);
    // A second tab with the same page, still showing the buttons when the first confirms.
    const stale = await suite.newPage();
    await stale.goto(redirectUrl);
    await page.goto(redirectUrl);
    expect(await page.textContent('h1')).to.include('$42.00');
    await Promise.all([page.waitForURL(redirectUrl), page.click('#confirm')]);
    expect(await page.getAttribute('.state', 'data-status')).to.equal('completed');
    expect(await page.textContent('.state')).to.include('$42.00 has been added');
    expect(await page.locator('#confirm').count()).to.equal(0);
    expect(await balance()).to.equal(42);
    // Confirming again from the stale tab shows the same completed payment and credits nothing more.
    await Promise.all([stale.waitForURL(redirectUrl), stale.click('#confirm')]);
    expect(await stale.getAttribute('.state', 'data-status')).to.equal('completed');
    expect(await balance()).to.equal(42);
    expect(suite.errors).to.deep.equal([]);
  });

  it('a double click on Confirm credits once', async () => {
    const redirectUrl = await startCheckout(7);
    await page.goto(redirectUrl);
    await page.dblclick('#confirm');
    await page.waitForSelector('.state[data-status="completed"]');
    expect(await balance()).to.equal(7);
    const rows = await testDatabase()
      .orm.em.getConnection()
      .execute('select 1 from credit_ledger where owner_id = ?', [user.userId]);
    expect(rows).to.have.length(1);
  });

  it('Cancel ends the checkout without credit', async () => {
    const redirectUrl = await startCheckout(9);
    await page.goto(redirectUrl);
    await Promise.all([page.waitForURL(redirectUrl), page.click('#cancel')]);
    expect(await page.getAttribute('.state', 'data-status')).to.equal('cancelled');
    expect(await balance()).to.equal(0);
    expect(suite.errors).to.deep.equal([]);
  });
});
