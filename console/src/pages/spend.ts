import { api, describeError } from '../api.ts';
import { h, notice, replace, usd } from '../dom.ts';

type GroupBy = 'conversation' | 'model' | 'day';

/** What my agents spent, by conversation, model or day. */
export async function showSpend(section: HTMLElement, groupBy: GroupBy = 'conversation'): Promise<void> {
  const title = h('h2', { id: 'spend-title' }, 'Spend');
  const choose = h(
    'select',
    { id: 'spend-group', 'aria-label': 'Group spend by' },
    ...(['conversation', 'model', 'day'] as const).map((value) => h('option', { value, selected: value === groupBy }, `By ${value}`)),
  );
  choose.addEventListener('change', () => void showSpend(section, choose.value as GroupBy));
  const { data, error, response } = await api.GET('/api/billing/spend', { params: { query: { group_by: groupBy, limit: 20 } } });
  if (!data) return replace(section, h('div', { class: 'section-head' }, title, choose), notice(describeError(error, response.status), 'error'));
  const label = (row: (typeof data.items)[number]) => {
    if (groupBy === 'conversation') return row.conversation_id ? h('a', { href: `#/conversations/${row.conversation_id}` }, row.title?.trim() || row.conversation_id.slice(0, 8)) : '–';
    if (groupBy === 'model') return row.model_name ?? 'unknown model';
    return row.day ?? '–';
  };
  replace(
    section,
    h('div', { class: 'section-head' }, title, choose),
    h('p', { class: 'balance' }, h('span', { class: 'hint' }, 'Total'), h('strong', null, usd(data.total_usd, 2))),
    data.items.length
      ? h(
          'div',
          { class: 'table-wrap' },
          h(
            'table',
            { class: 'list compact' },
            h('caption', { class: 'visually-hidden' }, `Spend by ${groupBy}`),
            h('thead', null, h('tr', null, h('th', { scope: 'col' }, groupBy[0]!.toUpperCase() + groupBy.slice(1)), h('th', { scope: 'col', class: 'num' }, 'Spent'))),
            h('tbody', null, data.items.map((row) => h('tr', null, h('td', null, label(row)), h('td', { class: 'num' }, usd(row.amount_usd, 4))))),
          ),
        )
      : h('p', { class: 'empty' }, 'Nothing spent yet.'),
  );
}
