import { api, describeError, type Schemas } from '../api.ts';
import { badge, h, money, notice, replace, time } from '../dom.ts';
import type { Page } from '../main.ts';
import { can, me } from '../me.ts';
import { showKeys } from './keys.ts';
import { showSpend } from './spend.ts';
import { showBudget } from './budget.ts';
import { showWebhookEndpoints } from './webhook-endpoints.ts';

/** Account: who I am, credits (bought, spent, balance, buy, history), spend, the monthly budget, my keys, webhook endpoints, the workspace link. */
export const accountPage: Page = (main) => {
  const credits = h('section', { class: 'card stack', 'aria-labelledby': 'credits-title' });
  const spend = h('section', { class: 'card stack', 'aria-labelledby': 'spend-title' });
  const budget = h('section', { class: 'card stack', 'aria-labelledby': 'budget-title', id: 'budget' });
  const keys = h('section', { class: 'card stack', 'aria-labelledby': 'keys-title' });
  const workspace = h('section', { class: 'card stack', 'aria-labelledby': 'workspace-title' });
  const endpoints = h('section', { class: 'card stack', 'aria-labelledby': 'endpoints-title' });
  const who = h('p', { class: 'hint', id: 'me' });
  replace(main, h('div', { class: 'page-head' }, h('h1', null, 'Account'), who), h('div', { class: 'grid' }, credits, spend, budget), h('div', { class: 'stack' }, keys, endpoints, workspace));
  // Each section only for a role that may see it in the organization acted in (a viewer sees none).
  void me().then((data) => {
    if (!data) return;
    replace(who, `Signed in as ${data.email}`, data.is_super_admin ? ' · super admin' : '');
    const show = (section: HTMLElement, permission: Schemas['OrgPermission'], draw: () => Promise<void>) => (can(data, permission) ? void draw() : section.remove());
    show(credits, 'VIEW_BILLING', () => showCredits(credits, can(data, 'MANAGE_BILLING')));
    show(spend, 'VIEW_BILLING', () => showSpend(spend));
    show(budget, 'VIEW_ORGANIZATION', () => showBudget(budget));
    show(keys, 'MANAGE_OWN_KEYS', () => showKeys(keys));
    show(workspace, 'USE_WORKSPACES', () => showWorkspace(workspace));
    show(endpoints, 'MANAGE_WEBHOOK_ENDPOINTS', () => showWebhookEndpoints(endpoints));
  });
};

async function showCredits(section: HTMLElement, mayBuy: boolean): Promise<void> {
  replace(section, h('h2', { id: 'credits-title' }, 'Credits'), h('p', { class: 'hint' }, 'Loading…'));
  const { data, error, response } = await api.GET('/api/billing/credits', { params: { query: { limit: 20 } } });
  if (!data) return replace(section, h('h2', { id: 'credits-title' }, 'Credits'), notice(describeError(error, response.status), 'error'));
  const amount = h('input', { id: 'amount', name: 'amount', type: 'number', min: 1, step: 1, value: 25, required: true, inputmode: 'numeric' });
  const message = h('div', { 'aria-live': 'polite' });
  const buy = h(
    'form',
    { class: 'inline-form', id: 'buy-credits' },
    h('label', { for: 'amount' }, 'Amount (USD)'),
    amount,
    h('button', { type: 'submit', class: 'btn primary' }, 'Buy credits'),
  );
  buy.addEventListener('submit', async (event) => {
    event.preventDefault();
    const value = Number(amount.value);
    if (!Number.isInteger(value) || value < 1) return replace(message, notice('Enter a whole number of US dollars, at least 1.', 'error'));
    const result = await api.POST('/api/billing/create-checkout-session', { body: { amount: value } });
    if (!result.data) return replace(message, notice(describeError(result.error, result.response.status), 'error'));
    // The checkout is a page of its own (the local one here, or Stripe's).
    location.assign(result.data.redirect_url);
  });
  replace(
    section,
    h('h2', { id: 'credits-title' }, 'Credits'),
    h('p', { class: 'balance' }, h('span', { class: 'hint' }, 'Balance'), h('strong', { id: 'balance', class: data.overdrawn ? 'bad' : null }, money(data.balance_usd, data.balance_micro_usd))),
    h(
      'dl',
      { class: 'facts' },
      h('div', null, h('dt', null, 'Bought'), h('dd', { id: 'purchased' }, money(data.purchased_usd, data.purchased_micro_usd))),
      h('div', null, h('dt', null, 'Spent by your agents'), h('dd', { id: 'spent' }, money(data.spent_usd, data.spent_micro_usd))),
    ),
    data.overdrawn ? notice('Your balance is below zero: buy credits to keep your agents running.', 'error') : null,
    mayBuy ? buy : null,
    mayBuy ? message : null,
    h('h3', null, 'Recent checkouts'),
    data.sessions.length ? sessionsTable(data.sessions) : h('p', { class: 'empty' }, 'No checkouts yet.'),
  );
}

function sessionsTable(sessions: Schemas['CheckoutSessionSummary'][]): HTMLElement {
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { class: 'list compact' },
      h('caption', { class: 'visually-hidden' }, 'Recent checkouts'),
      h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Started'), h('th', { scope: 'col', class: 'num' }, 'Amount'), h('th', { scope: 'col' }, 'Status'))),
      h(
        'tbody',
        null,
        sessions.map((session) =>
          h(
            'tr',
            null,
            h('td', null, session.status === 'pending' ? h('a', { href: `/billing/checkout/${session.id}` }, time(session.created_at)) : time(session.created_at)),
            h('td', { class: 'num' }, money(session.amount_usd)),
            h('td', null, badge(session.status)),
          ),
        ),
      ),
    ),
  );
}

async function showWorkspace(section: HTMLElement): Promise<void> {
  const title = h('h2', { id: 'workspace-title' }, 'Issue-tracker workspace');
  replace(section, title, h('p', { class: 'hint' }, 'Loading…'));
  const { data, error, response } = await api.GET('/integration/issuetracker/workspaces/link');
  if (response.status === 404) return replace(section, title, h('p', { class: 'empty' }, 'You are not linked to a workspace. An agent runtime or your administrator registers one (POST /integration/issuetracker/workspaces).'));
  if (!data) return replace(section, title, notice(describeError(error, response.status), 'error'));
  replace(
    section,
    title,
    h(
      'dl',
      { class: 'facts' },
      h('div', null, h('dt', null, 'Workspace'), h('dd', null, data.workspace.name)),
      h('div', null, h('dt', null, 'Status'), h('dd', null, badge(data.workspace.status))),
      h('div', null, h('dt', null, 'Your role'), h('dd', null, data.workspace.editable ? 'Admin' : 'Member')),
      h('div', null, h('dt', null, 'Linked'), h('dd', null, time(data.created_at))),
    ),
  );
}
