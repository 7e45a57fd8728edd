import { api, describeError, type Schemas } from '../api.ts';
import { formatMoney, h, money, notice, replace, svg } from '../dom.ts';
import type { Page } from '../main.ts';
import { replaceQuery } from '../router.ts';

type Report = Schemas['UsageReport'];
type Row = Schemas['UsageRow'];
type Grouping = Report['group_by'];

const PERIODS = [7, 30, 90] as const;
const TOP = 10;
const DAY_MS = 86_400_000;
const count = new Intl.NumberFormat();
const compact = new Intl.NumberFormat(undefined, { notation: 'compact', maximumFractionDigits: 1 });

/** Where the money and tokens went: per day as charts and a table, then the top models, members and conversations. */
export const usagePage: Page = (main, route) => {
  const asked = Number(route.query.get('days'));
  const days = (PERIODS as readonly number[]).includes(asked) ? asked : 30;
  const switcher = h(
    'div',
    { class: 'segmented', role: 'group', 'aria-label': 'Period' },
    PERIODS.map((period) =>
      h('button', { type: 'button', class: 'btn small', 'aria-pressed': period === days ? 'true' : 'false', onclick: () => choose(period) }, `${period} days`),
    ),
  );
  const body = h('div', { class: 'stack', id: 'usage', 'aria-live': 'polite' }, h('p', { class: 'hint' }, 'Loading…'));
  replace(main, h('div', { class: 'page-head' }, h('h1', null, 'Usage'), switcher), body);

  function choose(period: number): void {
    const query = new URLSearchParams(route.query);
    query.set('days', String(period));
    // A new entry, so Back returns to the previous period; the hashchange renders it.
    location.hash = `#/usage?${query}`;
  }
  if (route.query.get('days') !== String(days)) replaceQuery(new URLSearchParams({ ...Object.fromEntries(route.query), days: String(days) }));
  void show(body, days);
};

async function show(body: HTMLElement, days: number): Promise<void> {
  const since = new Date(Math.floor(Date.now() / DAY_MS) * DAY_MS - (days - 1) * DAY_MS).toISOString().slice(0, 10);
  const load = (group_by: Grouping) => api.GET('/api/billing/usage', { params: { query: { group_by, since, limit: TOP } } });
  const results = await Promise.all((['day', 'model', 'member', 'conversation'] as const).map(load));
  const failed = results.find((result) => !result.data);
  if (failed) return replace(body, notice(describeError(failed.error, failed.response.status), 'error'));
  const [byDay, byModel, byMember, byConversation] = results.map((result) => result.data!) as [Report, Report, Report, Report];
  const perDay = everyDay(byDay);
  replace(
    body,
    totalsCard(byDay, days),
    h(
      'section',
      { class: 'card stack', 'aria-labelledby': 'usage-daily-title' },
      h('h2', { id: 'usage-daily-title' }, 'Per day'),
      chart('cost', 'Cost per day', perDay, [{ name: 'Cost', className: 'bar-cost', value: (row) => row.cost_micro_usd }], (micro) => formatMoney(micro / 1e6)),
      chart(
        'tokens',
        'Tokens per day',
        perDay,
        [
          { name: 'Tokens in', className: 'bar-in', value: (row) => row.tokens_in },
          { name: 'Tokens out', className: 'bar-out', value: (row) => row.tokens_out },
        ],
        (tokens) => compact.format(tokens),
      ),
      h('details', { class: 'usage-table' }, h('summary', null, 'The same numbers as a table'), dayTable(perDay)),
    ),
    h(
      'div',
      { class: 'stack' },
      topTable('usage-models', 'Top models', 'Model', byModel, (row) => row.key),
      topTable('usage-members', 'Top members', 'Member', byMember, (row) => row.label ?? row.key),
      topTable('usage-conversations', 'Top conversations', 'Conversation', byConversation, (row) =>
        h('a', { href: `#/conversations/${encodeURIComponent(row.key)}` }, row.label?.trim() || row.key.slice(0, 8)),
      ),
    ),
    h('p', { class: 'hint' }, 'Days are UTC days. Members: today only you; with organizations, each member of yours.'),
  );
}

/** Every day of the range, those without usage as zeros, so the chart's bars are evenly spaced. */
function everyDay(report: Report): Row[] {
  const known = new Map(report.rows.map((row) => [row.key, row]));
  const rows: Row[] = [];
  for (let at = Date.parse(`${report.since}T00:00:00Z`); at < Date.parse(`${report.until}T00:00:00Z`); at += DAY_MS) {
    const key = new Date(at).toISOString().slice(0, 10);
    rows.push(known.get(key) ?? { key, label: null, cost_usd: 0, cost_micro_usd: 0, tokens_in: 0, tokens_out: 0, conversations: 0, llm_calls: 0 });
  }
  return rows;
}

const dayName = new Intl.DateTimeFormat(undefined, { weekday: 'short', day: 'numeric', month: 'short', timeZone: 'UTC' });
const dayLabel = (key: string) => dayName.format(new Date(`${key}T00:00:00Z`));

function totalsCard(report: Report, days: number): HTMLElement {
  const totals = report.totals;
  return h(
    'section',
    { class: 'card stack', 'aria-labelledby': 'usage-totals-title' },
    h('h2', { id: 'usage-totals-title' }, `Last ${days} days`),
    h('p', { class: 'balance' }, h('span', { class: 'hint' }, 'Cost'), h('strong', { id: 'usage-total' }, money(totals.cost_usd, totals.cost_micro_usd))),
    h(
      'dl',
      { class: 'facts usage-facts' },
      h('div', null, h('dt', null, 'Tokens in'), h('dd', { id: 'usage-tokens-in' }, count.format(totals.tokens_in))),
      h('div', null, h('dt', null, 'Tokens out'), h('dd', { id: 'usage-tokens-out' }, count.format(totals.tokens_out))),
      h('div', null, h('dt', null, 'Conversations'), h('dd', { id: 'usage-conversations-count' }, count.format(totals.conversations))),
      h('div', null, h('dt', null, 'LLM calls'), h('dd', { id: 'usage-llm-calls' }, count.format(totals.llm_calls))),
    ),
  );
}

interface Series {
  name: string;
  className: string;
  value: (row: Row) => number;
}

const counted = (n: number, one: string, many: string) => `${count.format(n)} ${n === 1 ? one : many}`;

/** What one day's bar says on hover: its numbers in full. */
function dayDescription(row: Row): string {
  return `${dayLabel(row.key)}: ${formatMoney(row.cost_usd)}, ${count.format(row.tokens_in)} tokens in, ${count.format(row.tokens_out)} tokens out, ${counted(row.conversations, 'conversation', 'conversations')}, ${counted(row.llm_calls, 'LLM call', 'LLM calls')}`;
}

/**
 * A bar chart, one (stacked) bar per day, drawn in a viewBox stretched to the card's width; the
 * scale's labels are HTML beside it, so text keeps its size at any width. Each day's numbers are in
 * its `<title>` (shown on hover) and in the table below.
 */
function chart(id: string, title: string, rows: Row[], series: Series[], format: (value: number) => string): HTMLElement {
  const height = 100;
  const slot = 10;
  const max = Math.max(...rows.map((row) => series.reduce((sum, s) => sum + s.value(row), 0)), 0);
  const scale = max === 0 ? 0 : (height - 2) / max;
  const bars = rows.map((row, i) => {
    let top = height;
    const parts = series.map((s) => {
      const size = s.value(row) * scale;
      top -= size;
      return svg('rect', { class: s.className, x: i * slot + 1.5, y: top, width: slot - 3, height: size });
    });
    // A full-height target, so a day without usage still shows its numbers on hover.
    return svg('g', { class: 'day' }, svg('title', null, dayDescription(row)), svg('rect', { class: 'day-hover', x: i * slot, y: 0, width: slot, height }), parts);
  });
  const total = rows.reduce((sum, row) => sum + series.reduce((s, item) => s + item.value(row), 0), 0);
  return h(
    'figure',
    { class: 'chart', id: `usage-chart-${id}` },
    h('figcaption', null, h('span', { class: 'chart-title' }, title), series.length > 1 ? legend(series) : null),
    h(
      'div',
      { class: 'chart-frame' },
      h('span', { class: 'chart-max hint' }, max === 0 ? 'none yet' : format(max)),
      svg(
        'svg',
        { viewBox: `0 0 ${rows.length * slot} ${height}`, preserveAspectRatio: 'none', role: 'img', 'aria-label': `${title}, ${rows.length} days: ${format(total)} in all (numbers in the table below)` },
        svg('line', { class: 'axis', x1: 0, x2: rows.length * slot, y1: height - 0.5, y2: height - 0.5 }),
        svg('line', { class: 'grid-line', x1: 0, x2: rows.length * slot, y1: 1, y2: 1 }),
        bars,
      ),
      h('div', { class: 'chart-days hint' }, h('span', null, dayLabel(rows[0]!.key)), h('span', null, dayLabel(rows[rows.length - 1]!.key))),
    ),
  );
}

function legend(series: Series[]): HTMLElement {
  return h(
    'span',
    { class: 'legend' },
    series.map((s) => h('span', { class: 'legend-item' }, h('span', { class: `swatch ${s.className}`, 'aria-hidden': 'true' }), s.name)),
  );
}

function dayTable(rows: Row[]): HTMLElement {
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { class: 'list compact stacked usage-list', id: 'usage-days' },
      h('caption', { class: 'visually-hidden' }, 'Usage per day, oldest first'),
      header(['Day', 'Cost', 'Tokens in', 'Tokens out', 'Conversations', 'LLM calls']),
      h(
        'tbody',
        null,
        rows.map((row) =>
          h(
            'tr',
            null,
            h('th', { scope: 'row', 'data-label': 'Day' }, h('time', { datetime: row.key }, dayLabel(row.key))),
            amountCells(row, true),
          ),
        ),
      ),
    ),
  );
}

function header(names: string[]): HTMLElement {
  return h('thead', null, h('tr', null, names.map((name, i) => h('th', { scope: 'col', class: i === 0 ? null : 'num' }, name))));
}

function amountCells(row: Row, withConversations: boolean): (HTMLElement | null)[] {
  return [
    h('td', { class: 'num', 'data-label': 'Cost' }, money(row.cost_usd, row.cost_micro_usd)),
    h('td', { class: 'num', 'data-label': 'Tokens in' }, count.format(row.tokens_in)),
    h('td', { class: 'num', 'data-label': 'Tokens out' }, count.format(row.tokens_out)),
    withConversations ? h('td', { class: 'num', 'data-label': 'Conversations' }, count.format(row.conversations)) : null,
    h('td', { class: 'num', 'data-label': 'LLM calls' }, count.format(row.llm_calls)),
  ];
}

/** The largest groups of a report, with how many more there are. */
function topTable(id: string, title: string, column: string, report: Report, name: (row: Row) => string | HTMLElement): HTMLElement {
  const withConversations = report.group_by !== 'conversation';
  return h(
    'section',
    { class: 'card stack', 'aria-labelledby': `${id}-title` },
    h('h2', { id: `${id}-title` }, title),
    report.rows.length
      ? h(
          'div',
          { class: 'table-wrap' },
          h(
            'table',
            { class: 'list compact stacked usage-list', id },
            h('caption', { class: 'visually-hidden' }, `${title}, largest cost first`),
            header([column, 'Cost', 'Tokens in', 'Tokens out', ...(withConversations ? ['Conversations'] : []), 'LLM calls']),
            h('tbody', null, report.rows.map((row) => h('tr', null, h('td', { class: 'title', 'data-label': column }, name(row)), amountCells(row, withConversations)))),
          ),
        )
      : h('p', { class: 'empty' }, 'No usage in this period.'),
    report.group_count > report.rows.length ? h('p', { class: 'hint' }, `The ${report.rows.length} largest of ${count.format(report.group_count)}.`) : null,
  );
}
