/// <reference lib="dom" />
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { minimalEvent } from '../fixtures/events.ts';
import { browserSuite, expectAccessible, photograph, SCREENSHOTS } from '../helpers/browser.ts';
import { createUserFixture } from '../helpers/fixtures.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';
import { generateSecret, hashSecret } from '../../src/identity/secrets.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { webhookPath } from '../helpers/webhook.ts';

/** The Organizations section of the administration page, in headless Chromium against a real server. */
describe('console: administration of organizations (headless Chromium)', function () {
  this.timeout(120_000);
  const suite = browserSuite();
  let page: Page;

  beforeEach(async () => {
    page = await suite.newPage();
  });

  it('lists organizations with members and state; Suspend asks first, refuses the organization\'s keys, Resume restores them; a hostile name stays text', async () => {
    const root = await createUserFixture({ superAdmin: true, email: 'root@instance.example' });
    const ada = await createUserFixture({ email: 'ada@acme.example' });
    const bob = await createUserFixture({ email: 'bob@acme.example' });
    const acme = randomUUID();
    const hostile = '<img src=x onerror="document.body.dataset.owned=1">Acme';
    const connection = testDatabase().orm.em.getConnection();
    await connection.execute('insert into organizations (id, name) values (?, ?)', [acme, hostile]);
    await connection.execute("insert into organization_members (org_id, user_id, role) values (?, ?, 'owner'), (?, ?, 'member')", [acme, ada.userId, acme, bob.userId]);
    // Bob's agent runtime's key, acting in Acme.
    const key = generateSecret('session_api_key');
    rememberSecret(key);
    await connection.execute("insert into credentials (id, user_id, kind, secret_hash, org_id) values (?, ?, 'session_api_key', ?, ?)", [randomUUID(), bob.userId, hashSecret(key), acme]);
    const webhook = async (secret: string) =>
      (await fetch(`${suite.baseUrl}${webhookPath(randomUUID())}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Session-API-Key': secret },
        body: JSON.stringify([minimalEvent('PauseEvent', { id: randomUUID() })]),
      })).status;

    await suite.signIn(page, root.accessToken, '#/admin');
    const row = page.locator('#organizations tbody tr', { hasText: 'onerror' });
    await row.waitFor();
    expect(await row.locator('td').nth(0).textContent()).to.include(hostile);
    expect(await page.evaluate(() => document.body.dataset.owned)).to.equal(undefined);
    expect(await row.locator('td.num').textContent()).to.equal('2');
    expect(await page.locator('#organizations tbody tr', { hasText: 'ada@acme.example' }).locator('.badge[data-status="personal"]').count()).to.equal(1);

    // Asks first; Cancel leaves it as it was.
    await row.locator('button', { hasText: 'Suspend' }).click();
    await row.locator('button', { hasText: 'Cancel' }).click();
    expect(await row.locator('.badge[data-status="active"]').count()).to.equal(1);
    expect(await webhook(key)).to.equal(200);
    await row.locator('button', { hasText: 'Suspend' }).click();
    await row.locator('button', { hasText: 'Confirm suspend' }).click();
    await page.locator('#organizations tbody tr', { hasText: 'onerror' }).locator('.badge[data-status="suspended"]').waitFor();
    expect(await webhook(key)).to.equal(401);
    await expectAccessible(page);
    await photograph(page, 'admin-organizations', { checked: true });
    await page.locator('#organizations-admin').screenshot({ path: path.join(SCREENSHOTS, 'admin-organizations-section-1280.png') });
    await page.setViewportSize({ width: 375, height: 800 });
    await page.locator('#organizations-admin').screenshot({ path: path.join(SCREENSHOTS, 'admin-organizations-section-375.png') });
    await page.setViewportSize({ width: 1280, height: 800 });

    await page.locator('#organizations tbody tr', { hasText: 'onerror' }).locator('button', { hasText: 'Resume' }).click();
    await page.locator('#organizations tbody tr', { hasText: 'onerror' }).locator('.badge[data-status="active"]').waitFor();
    expect(await webhook(key)).to.equal(200);
    expect(suite.errors).to.deep.equal([]);
  });
});
