/// <reference lib="dom" />
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { browserSuite, expectAccessible, photograph } from '../helpers/browser.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';

/** Organizations in the console, in headless Chromium: the switcher, the Members page, invitations end to end. */
describe('console in a browser: organizations and invitations', function () {
  this.timeout(120_000);
  const suite = browserSuite();
  let admin: UserFixture;
  let second: UserFixture;

  beforeEach(async () => {
    admin = await createUserFixture({ email: `admin-${randomUUID().slice(0, 8)}@acme.example` });
    second = await createUserFixture({ email: `second-${randomUUID().slice(0, 8)}@acme.example` });
  });

  const call = async (user: UserFixture, method: string, path: string, body?: object, orgId?: string) => {
    const response = await fetch(`${suite.baseUrl}${path}`, {
      method,
      headers: { 'Content-Type': 'application/json', 'X-Access-Token': user.accessToken, ...(orgId ? { 'X-Org-Id': orgId } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: response.status, body: response.status === 204 ? undefined : ((await response.json()) as Record<string, unknown>) };
  };

  /** A conversation stored in `orgId` by a session API key of that organization. */
  async function conversationIn(orgId: string, text: string): Promise<string> {
    const key = await call(admin, 'POST', '/api/keys', { kind: 'session_api_key', name: 'runtime' }, orgId);
    expect(key.status).to.equal(201);
    rememberSecret(key.body!.secret as string);
    const id = randomUUID();
    const response = await fetch(`${suite.baseUrl}/api/v1/webhooks/conversations`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Session-API-Key': key.body!.secret as string },
      body: JSON.stringify({ id, title: text, execution_status: 'finished', metrics: null }),
    });
    expect(response.status, await response.clone().text()).to.be.oneOf([200, 201]);
    return id;
  }

  it('a single user with only a personal organization sees no switcher', async () => {
    const page = await suite.newPage();
    await suite.signIn(page, second.accessToken);
    await page.locator('nav a[href="#/members"]').click();
    await page.getByText('This is your personal organization').waitFor();
    expect(await page.locator('#org-switcher').count()).to.equal(0);
    await expectAccessible(page);

    // An organization made, renamed and deleted again: the switcher comes and goes with it.
    await page.fill('#org-name', 'Short-lived');
    await page.click('#create-org button[type=submit]');
    await page.locator('#org-switcher').waitFor();
    await page.fill('#rename-org', 'Renamed');
    await page.click('#rename-org-form button[type=submit]');
    await page.locator('h1', { hasText: 'Renamed' }).waitFor();
    await page.click('#delete-org button');
    await page.click('#delete-org button.confirm');
    await page.getByText('This is your personal organization').waitFor();
    expect(await page.locator('#org-switcher').count()).to.equal(0);
    expect(suite.errors).to.deep.equal([]);
  });

  it('admin invites, the second user opens the accept link, switches organization and sees its conversation', async () => {
    const adminPage = await suite.newPage();
    await suite.signIn(adminPage, admin.accessToken, '#/members');
    // The admin creates the organization from the Members page and acts in it at once.
    await adminPage.fill('#org-name', 'Acme <b>research</b>');
    await adminPage.click('#create-org button[type=submit]');
    await adminPage.locator('#org-switcher').waitFor();
    const orgId = await adminPage.locator('#org-switcher').inputValue();
    expect(await adminPage.locator('h1').textContent()).to.equal('Acme <b>research</b>');
    await conversationIn(orgId, 'The team conversation');

    await adminPage.fill('#invite-email', second.email);
    await adminPage.selectOption('#invite-role', 'viewer');
    await adminPage.click('#invite button[type=submit]');
    const link = (await adminPage.locator('#invitation-link').textContent())!;
    expect(link).to.match(new RegExp(`^${suite.baseUrl}/#/invitations/apin_[A-Za-z0-9_-]{43}$`));
    rememberSecret(link.split('/invitations/')[1]!);
    await adminPage.locator('#invitations tbody tr').first().waitFor();
    expect(await adminPage.locator('#invitations tbody tr').count()).to.equal(1);
    await photograph(adminPage, 'organizations-members-admin', { checked: true });

    // The second user opens the link, signs in, accepts, and acts in the organization.
    const secondPage = await suite.newPage();
    await secondPage.goto(link);
    await secondPage.fill('#token', second.accessToken);
    await secondPage.click('#sign-in button[type=submit]');
    await secondPage.waitForURL(/#\/conversations$/);
    await secondPage.getByText('The team conversation').waitFor();
    expect(await secondPage.locator('#org-switcher').inputValue()).to.equal(orgId);
    await photograph(secondPage, 'organizations-conversations-switched', { checked: true });

    // Switching back to the personal organization hides the team's conversation.
    await secondPage.selectOption('#org-switcher', second.orgId);
    await secondPage.locator('main').getByText('The team conversation').waitFor({ state: 'detached' });
    await secondPage.selectOption('#org-switcher', orgId);
    await secondPage.getByText('The team conversation').waitFor();

    // A viewer reads the conversation but is offered neither Rename nor Share, nor the Usage page.
    await secondPage.getByText('The team conversation').click();
    await secondPage.locator('#export').waitFor();
    await secondPage.waitForTimeout(200);
    expect(await secondPage.locator('#rename, #share').count()).to.equal(0);
    expect(await secondPage.locator('nav a[href="#/usage"]').count()).to.equal(0);

    // A viewer sees the members but is offered no invitation, role change or removal of others.
    await secondPage.click('nav a[href="#/members"]');
    await secondPage.locator('#members tbody tr').nth(1).waitFor();
    expect(await secondPage.locator('#invite').count()).to.equal(0);
    expect(await secondPage.locator('#members select').count()).to.equal(0);
    expect(await secondPage.locator('#members button', { hasText: 'Remove' }).count()).to.equal(0);
    expect(await secondPage.locator('#members button', { hasText: 'Leave' }).count()).to.equal(1);
    await photograph(secondPage, 'organizations-members-viewer', { checked: true });

    // The admin sees the new member, makes them a member, and the invitation is no longer pending.
    await adminPage.reload();
    await adminPage.locator(`#role-${second.userId}`).waitFor();
    // The invitations come by a request of their own, maybe after the members: waited for, not counted at once.
    await adminPage.getByText('No pending invitations.').waitFor({ timeout: 5_000 });
    expect(await adminPage.locator('#invitations tbody tr').count()).to.equal(0);
    await Promise.all([
      adminPage.waitForResponse((response) => response.request().method() === 'PATCH' && response.url().endsWith(`/members/${second.userId}`)),
      adminPage.selectOption(`#role-${second.userId}`, 'member'),
    ]);
    const members = await call(admin, 'GET', `/api/orgs/${orgId}/members`);
    expect((members.body!.members as { user_id: string; role: string }[]).find((m) => m.user_id === second.userId)!.role).to.equal('member');
    expect(await adminPage.evaluate(() => (window as unknown as { __owned?: number }).__owned)).to.equal(undefined);
    expect(suite.errors).to.deep.equal([]);
  });

  it('an invitation link for someone else says so and changes nothing', async () => {
    const org = await call(admin, 'POST', '/api/orgs', { name: 'Acme' });
    const invitation = await call(admin, 'POST', `/api/orgs/${org.body!.id as string}/invitations`, { email: 'nobody@acme.example', role: 'member' });
    rememberSecret(invitation.body!.token as string);
    const page = await suite.newPage();
    await suite.signIn(page, second.accessToken, `#/invitations/${invitation.body!.token as string}`);
    await page.getByText('This invitation is for another e-mail address').waitFor();
    expect(await page.locator('#org-switcher').count()).to.equal(0);
  });
});
