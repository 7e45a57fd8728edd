import { api, describeError, type Schemas } from '../api.ts';
import { formatMoney, h, money, notice, replace } from '../dom.ts';
import { me } from '../me.ts';

type Budget = Schemas['OrganizationBudget'];

/** The organization the console acts in (the switcher's choice, else the default): `org_id` of `/api/me`. */
async function actingOrgId(): Promise<string | undefined> {
  return (await me())?.org_id;
}

/** Reads the budget of the organization the console acts in; undefined (with why) when it cannot. */
async function loadBudget(): Promise<{ budget?: Budget; problem?: string }> {
  const orgId = await actingOrgId();
  if (!orgId) return { problem: 'Could not tell which organization you act in.' };
  const { data, error, response } = await api.GET('/api/orgs/{org_id}/budget', { params: { path: { org_id: orgId } } });
  return data ? { budget: data } : { problem: describeError(error, response.status) };
}

/** "80 % of $500.00": how far a spend is into its limit, for people. */
function share(spendUsd: number, limitUsd: number | null): string {
  if (limitUsd === null) return 'no limit';
  if (limitUsd === 0) return 'limit $0.00';
  return `${Math.floor((spendUsd / limitUsd) * 100)} % of ${formatMoney(limitUsd)}`;
}

/** The sentence of one alert, for the banner. */
function alertText(alert: Budget['alerts'][number], month: string): string {
  const whose = alert.scope === 'organization' ? "This organization's spend" : 'Your own spend';
  const limit = alert.scope === 'organization' ? 'its monthly budget' : 'your monthly budget';
  return `${whose} in ${month} (${formatMoney(alert.spend_usd)}) has passed ${alert.percent} % of ${limit} of ${formatMoney(alert.limit_usd)}.`;
}

/** The banner shown under the top bar while this month's spend has passed an alert threshold; nothing otherwise. */
export async function showBudgetBanner(slot: HTMLElement): Promise<void> {
  const { budget } = await loadBudget();
  if (!budget || budget.alerts.length === 0) return replace(slot);
  const over = budget.alerts.some((alert) => alert.percent >= 100);
  replace(
    slot,
    h(
      'div',
      { class: `budget-banner ${over ? 'over' : ''}`, role: 'status', id: 'budget-banner' },
      h('strong', null, over ? 'Budget reached. ' : 'Budget alert. '),
      budget.alerts.map((alert) => `${alertText(alert, budget.month)} `),
      h('a', { href: '#/account' }, 'See spend and budget'),
    ),
  );
}

/** The budget card: this month's spend against the limits, per member, and the form to change it for those allowed to. */
export async function showBudget(section: HTMLElement): Promise<void> {
  const title = h('h2', { id: 'budget-title' }, 'Monthly budget');
  replace(section, title, h('p', { class: 'hint' }, 'Loading…'));
  const { budget, problem } = await loadBudget();
  if (!budget) return replace(section, title, notice(problem ?? 'The budget could not be read.', 'error'));
  const reached = new Map(budget.alerts.map((alert) => [alert.scope, alert.percent]));
  replace(
    section,
    h('div', { class: 'section-head' }, title, h('span', { class: 'hint', id: 'budget-month' }, budget.month)),
    h(
      'p',
      { class: 'balance' },
      h('span', { class: 'hint' }, 'Spent this month'),
      h('strong', { id: 'budget-spend', class: reached.get('organization') !== undefined && reached.get('organization')! >= 100 ? 'bad' : null }, money(budget.spend_usd, budget.spend_micro_usd)),
      h('span', { class: 'hint', id: 'budget-share' }, share(budget.spend_usd, budget.monthly_limit_usd)),
    ),
    meter(budget.spend_usd, budget.monthly_limit_usd, budget.alert_thresholds),
    h(
      'dl',
      { class: 'facts' },
      h('div', null, h('dt', null, 'Organization limit'), h('dd', { id: 'budget-limit' }, budget.monthly_limit_usd === null ? 'None' : money(budget.monthly_limit_usd, budget.monthly_limit_micro_usd))),
      h('div', null, h('dt', null, 'Per-member limit'), h('dd', { id: 'budget-member-limit' }, budget.member_monthly_limit_usd === null ? 'None' : money(budget.member_monthly_limit_usd, budget.member_monthly_limit_micro_usd))),
      h('div', null, h('dt', null, 'Alerts at'), h('dd', { id: 'budget-thresholds' }, budget.alert_thresholds.length ? budget.alert_thresholds.map((p) => `${p} %`).join(', ') : 'None')),
    ),
    budget.allowed ? null : notice(budget.reason ?? 'Spending is over budget.', 'error'),
    membersTable(budget),
    budget.editable ? budgetForm(section, budget) : h('p', { class: 'hint' }, 'Owners and admins of the organization can change the budget.'),
  );
}

/** A bar of the month's spend against the limit, with a tick at each alert threshold (up to 100 %). */
function meter(spendUsd: number, limitUsd: number | null, thresholds: number[]): HTMLElement | null {
  if (limitUsd === null || limitUsd === 0) return null;
  const percent = Math.min(100, (spendUsd / limitUsd) * 100);
  // Through the CSSOM: the console's CSP refuses style attributes.
  const fill = h('div', { class: `fill ${percent >= 100 ? 'over' : ''}` });
  fill.style.width = `${percent.toFixed(2)}%`;
  const ticks = thresholds
    .filter((p) => p < 100)
    .map((p) => {
      const tick = h('span', { class: 'tick' });
      tick.style.left = `${p}%`;
      return tick;
    });
  return h('div', { class: 'budget-meter', role: 'img', 'aria-label': `${Math.floor((spendUsd / limitUsd) * 100)} % of the monthly budget spent` }, fill, ticks);
}

function membersTable(budget: Budget): HTMLElement {
  if (budget.members.length === 0) return h('p', { class: 'empty' }, 'No members.');
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { class: 'list compact', id: 'budget-members' },
      h('caption', { class: 'visually-hidden' }, `Spend per member in ${budget.month}, largest first`),
      h(
        'thead',
        null,
        h('tr', null, h('th', { scope: 'col' }, 'Member'), h('th', { scope: 'col', class: 'num' }, 'Spent'), budget.member_monthly_limit_usd === null ? null : h('th', { scope: 'col', class: 'num' }, 'Of limit')),
      ),
      h(
        'tbody',
        null,
        budget.members.map((member) =>
          h(
            'tr',
            null,
            h('td', { class: 'title' }, member.email ?? `Deleted user ${member.user_id.slice(0, 8)}`),
            h('td', { class: 'num' }, money(member.spend_usd, member.spend_micro_usd)),
            budget.member_monthly_limit_usd === null
              ? null
              : h('td', { class: `num ${member.spend_usd >= budget.member_monthly_limit_usd ? 'bad' : ''}` }, share(member.spend_usd, budget.member_monthly_limit_usd).replace(/ of .*/, '')),
          ),
        ),
      ),
    ),
  );
}

/** A limit field's value as the API takes it: empty is no limit. */
function limitValue(input: HTMLInputElement): number | null {
  return input.value.trim() === '' ? null : Number(input.value);
}

function budgetForm(section: HTMLElement, budget: Budget): HTMLElement {
  const field = (id: string, label: string, value: number | null, hint: string) => {
    const input = h('input', { id, name: id, type: 'number', min: 0, step: 'any', inputmode: 'decimal', value: value ?? '', placeholder: 'No limit', 'aria-describedby': `${id}-hint` });
    return { input, row: h('div', null, h('label', { for: id }, label), input, h('p', { class: 'hint', id: `${id}-hint` }, hint)) };
  };
  const limit = field('budget-limit-input', 'Organization (USD/month)', budget.monthly_limit_usd, 'Empty: no limit.');
  const memberLimit = field('budget-member-limit-input', 'Each member (USD/month)', budget.member_monthly_limit_usd, 'What their keys post; empty: no limit.');
  const thresholds = h('input', { id: 'budget-thresholds-input', name: 'thresholds', type: 'text', value: budget.alert_thresholds.join(', '), inputmode: 'numeric', 'aria-describedby': 'budget-thresholds-hint' });
  const message = h('div', { 'aria-live': 'polite' });
  const form = h(
    'form',
    { class: 'form-grid budget-form', id: 'budget-form' },
    limit.row,
    memberLimit.row,
    h('div', null, h('label', { for: 'budget-thresholds-input' }, 'Alerts (% of a limit)'), thresholds, h('p', { class: 'hint', id: 'budget-thresholds-hint' }, 'Ascending, 1 to 1000, separated by commas.')),
    h('div', { class: 'form-actions' }, h('button', { type: 'submit', class: 'btn primary' }, 'Save budget')),
    message,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const percents = thresholds.value.split(',').map((part) => part.trim()).filter((part) => part !== '').map(Number);
    if (percents.some((p) => !Number.isInteger(p))) return replace(message, notice('Alert thresholds are whole percentages, separated by commas.', 'error'));
    const { data, error, response } = await api.PUT('/api/orgs/{org_id}/budget', {
      params: { path: { org_id: budget.org_id } },
      body: { monthly_limit_usd: limitValue(limit.input), member_monthly_limit_usd: limitValue(memberLimit.input), alert_thresholds: percents },
    });
    if (!data) return replace(message, notice(describeError(error, response.status), 'error'));
    await showBudget(section);
    section.append(notice('Budget saved.'));
  });
  return h('details', { class: 'budget-edit' }, h('summary', null, 'Change the budget'), form);
}
