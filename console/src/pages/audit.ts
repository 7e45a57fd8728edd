import { api, describeError, type Schemas } from '../api.ts';
import { h, notice, replace } from '../dom.ts';

type People = Record<string, string>;

const VERBS: Record<string, string> = {
  created: 'created',
  updated: 'updated',
  deleted: 'deleted',
  revoked: 'revoked',
  granted: 'granted',
  suspended: 'suspended',
  resumed: 'resumed',
  linked: 'linked',
  unlinked: 'unlinked',
  registered: 'registered',
  activated: 'activated',
  deactivated: 'deactivated',
  completed: 'completed',
};

/** `user.suspended` → "User suspended", `super_admin.granted` → "Super admin granted". */
export function actionInWords(action: string): string {
  const dot = action.lastIndexOf('.');
  const target = (dot < 0 ? action : action.slice(0, dot)).replaceAll('_', ' ');
  const verb = dot < 0 ? '' : action.slice(dot + 1);
  const sentence = `${target} ${VERBS[verb] ?? verb.replaceAll('_', ' ')}`.trim();
  return sentence[0]!.toUpperCase() + sentence.slice(1);
}

const oneLine = new Intl.DateTimeFormat(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });

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
    body.append(...data.items.map((entry) => entryRow(entry, data.people)));
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
        { class: 'list compact stacked', id: 'audit-log' },
        h('caption', { class: 'visually-hidden' }, 'Audit log'),
        h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'When'), h('th', { scope: 'col' }, 'Action'), h('th', { scope: 'col' }, 'Target'), h('th', { scope: 'col' }, 'By'), h('th', { scope: 'col' }, 'Details'))),
        body,
      ),
    ),
    status,
    h('div', { class: 'pager' }, more),
  );
  await load(true);
}

/** A user id as their e-mail (the id in the tooltip); CLI and system actors in words. */
function person(id: string, people: People): HTMLElement | string {
  const email = people[id];
  if (email) return h('span', { title: id }, email);
  if (id.startsWith('cli:')) return `Admin CLI (${id.slice(4)})`;
  if (id.startsWith('system:')) return `System (${id.slice(7)})`;
  return h('span', { class: 'hint' }, id);
}

function entryRow(entry: Schemas['AuditEntry'], people: People): HTMLElement {
  const date = new Date(entry.occurred_at);
  return h(
    'tr',
    null,
    h('td', { 'data-label': 'When', class: 'nowrap' }, h('time', { datetime: entry.occurred_at, title: entry.occurred_at }, oneLine.format(date))),
    h('td', { 'data-label': 'Action' }, h('span', { title: entry.action }, actionInWords(entry.action))),
    h('td', { 'data-label': 'Target' }, entry.target_type === 'user' ? person(entry.target_id, people) : [`${entry.target_type.replaceAll('_', ' ')} `, h('span', { class: 'hint', title: entry.target_id }, entry.target_id.slice(0, 8))]),
    h('td', { 'data-label': 'By' }, person(entry.actor, people)),
    h('td', { 'data-label': 'Details' }, details(entry.summary)),
  );
}

/** The summary as key–value lines: the first two shown, the rest behind "more". */
function details(summary: Record<string, unknown>): HTMLElement | string {
  const entries = Object.entries(summary);
  if (!entries.length) return '';
  const line = ([key, value]: [string, unknown]) => h('div', { class: 'kv' }, h('dt', null, key.replaceAll('_', ' ')), h('dd', null, typeof value === 'string' ? value : JSON.stringify(value)));
  const shown = h('dl', { class: 'kv-list' }, entries.slice(0, 2).map(line));
  if (entries.length <= 2) return shown;
  return h('div', null, shown, h('details', { class: 'kv-more' }, h('summary', null, `${entries.length - 2} more`), h('dl', { class: 'kv-list' }, entries.slice(2).map(line))));
}
