import { api, describeError, type Schemas } from '../api.ts';
import { h, notice, replace, time } from '../dom.ts';

/** The audit log, newest first, filtered by action or actor, a page at a time. */
export async function showAuditLog(section: HTMLElement): Promise<void> {
  const title = h('h2', { id: 'audit-title' }, 'Audit log');
  const action = h('input', { id: 'audit-action', placeholder: 'e.g. user.suspended', autocomplete: 'off', maxlength: 100 });
  const actor = h('input', { id: 'audit-actor', placeholder: 'user id or cli:…', autocomplete: 'off', maxlength: 320 });
  const form = h(
    'form',
    { class: 'filters', role: 'search', 'aria-label': 'Audit log' },
    h('div', null, h('label', { for: 'audit-action' }, 'Action'), action),
    h('div', null, h('label', { for: 'audit-actor' }, 'Actor'), actor),
    h('button', { type: 'submit', class: 'btn' }, 'Filter'),
  );
  const body = h('tbody');
  const status = h('div', { 'aria-live': 'polite' });
  const more = h('button', { type: 'button', class: 'btn small', hidden: true }, 'Older entries');
  let before: number | undefined;
  async function load(reset: boolean): Promise<void> {
    if (reset) {
      before = undefined;
      body.replaceChildren();
    }
    const query = { limit: 50, ...(action.value.trim() ? { action: action.value.trim() } : {}), ...(actor.value.trim() ? { actor: actor.value.trim() } : {}), ...(before ? { before_id: before } : {}) };
    const { data, error, response } = await api.GET('/api/admin/audit-log', { params: { query } });
    if (!data) return replace(status, notice(describeError(error, response.status), 'error'));
    replace(status, body.children.length + data.items.length === 0 ? h('p', { class: 'empty' }, 'No entries.') : null);
    body.append(...data.items.map(entryRow));
    before = data.next_before_id ?? undefined;
    more.hidden = !before;
  }
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void load(true);
  });
  more.addEventListener('click', () => void load(false));
  replace(
    section,
    title,
    form,
    h(
      'div',
      { class: 'table-wrap' },
      h(
        'table',
        { class: 'list compact', id: 'audit-log' },
        h('caption', { class: 'visually-hidden' }, 'Audit log'),
        h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'When'), h('th', { scope: 'col' }, 'Action'), h('th', { scope: 'col' }, 'Target'), h('th', { scope: 'col' }, 'Actor'), h('th', { scope: 'col' }, 'Details'))),
        body,
      ),
    ),
    status,
    h('div', { class: 'pager' }, more),
  );
  await load(true);
}

function entryRow(entry: Schemas['AuditEntry']): HTMLElement {
  const summary = JSON.stringify(entry.summary);
  return h(
    'tr',
    null,
    h('td', null, time(entry.occurred_at)),
    h('td', null, h('code', null, entry.action)),
    h('td', null, `${entry.target_type} `, h('span', { class: 'hint' }, entry.target_id)),
    h('td', { class: 'hint' }, entry.actor),
    h('td', null, summary === '{}' ? '' : h('code', { class: 'summary-json' }, summary.length > 200 ? `${summary.slice(0, 200)}…` : summary)),
  );
}
