import { api, describeError } from '../api.ts';
import { h, money, notice, replace } from '../dom.ts';

type GroupBy = 'conversation' | 'model' | 'day' | 'member';
const PAGE = 20;

/** What the organization's agents spent, by conversation, model or member (largest first) or by day (newest first), a page at a time. */
export async function showSpend(section: HTMLElement, groupBy: GroupBy = 'conversation', offset = 0): Promise<void> {
  const title = h('h2', { id: 'spend-title' }, 'Spend');
  const choose = h(
    'select',
    { id: 'spend-group', 'aria-label': 'Group spend by' },
    ...(['conversation', 'model', 'day', 'member'] as const).map((value) => h('option', { value, selected: value === groupBy }, `By ${value}`)),
  );
  choose.addEventListener('change', () => void showSpend(section, choose.value as GroupBy));
  const order = groupBy === 'day' ? 'default' : 'amount';
  const { data, error, response } = await api.GET('/api/billing/spend', { params: { query: { group_by: groupBy, limit: PAGE, offset, order } } });
  if (!data) return replace(section, h('div', { class: 'section-head' }, title, choose), notice(describeError(error, response.status), 'error'));
  const label = (row: (typeof data.items)[number]) => {
    if (groupBy === 'conversation') return row.conversation_id ? h('a', { href: `#/conversations/${row.conversation_id}` }, row.title?.trim() || row.conversation_id.slice(0, 8)) : '–';
    if (groupBy === 'model') return row.model_name ?? 'unknown model';
    if (groupBy === 'member') return row.email ?? (row.member_id ? `Deleted user ${row.member_id.slice(0, 8)}` : 'Before members were recorded');
    return row.day ?? '–';
  };
  const pager = h(
    'div',
    { class: 'pager' },
    offset > 0 ? h('button', { type: 'button', class: 'btn small', onclick: () => void showSpend(section, groupBy, Math.max(0, offset - PAGE)) }, 'Previous') : null,
    h('span', { class: 'hint', id: 'spend-range' }, `${data.group_count === 0 ? 0 : offset + 1}–${offset + data.items.length} of ${data.group_count}`),
    data.next_offset !== null ? h('button', { type: 'button', class: 'btn small', onclick: () => void showSpend(section, groupBy, data.next_offset!) }, 'Next') : null,
  );
  replace(
    section,
    h('div', { class: 'section-head' }, title, choose),
    h('p', { class: 'balance' }, h('span', { class: 'hint' }, 'Total'), h('strong', { id: 'spend-total' }, money(data.total_usd, data.total_micro_usd))),
    data.items.length
      ? h(
          'div',
          { class: 'table-wrap' },
          h(
            'table',
            { class: 'list compact', id: 'spend' },
            h('caption', { class: 'visually-hidden' }, `Spend by ${groupBy}, ${order === 'amount' ? 'largest first' : 'newest first'}`),
            h('thead', null, h('tr', null, h('th', { scope: 'col' }, groupBy[0]!.toUpperCase() + groupBy.slice(1)), h('th', { scope: 'col', class: 'num' }, 'Spent'))),
            h('tbody', null, data.items.map((row) => h('tr', null, h('td', null, label(row)), h('td', { class: 'num' }, money(row.amount_usd, row.amount_micro_usd))))),
          ),
        )
      : h('p', { class: 'empty' }, 'Nothing spent yet.'),
    data.group_count > PAGE ? pager : null,
  );
}
