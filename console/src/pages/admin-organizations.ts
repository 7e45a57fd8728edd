import { api, describeError, type Schemas } from '../api.ts';
import { confirmedAction } from '../confirm.ts';
import { badge, h, notice, replace, time } from '../dom.ts';

type AdminOrganization = Schemas['AdminOrganization'];
const PAGE = 25;

/** Organizations: search by name, see member counts, suspend (asks first) and resume. */
export async function showOrganizations(section: HTMLElement, query = '', offset = 0): Promise<void> {
  const title = h('h2', { id: 'organizations-title' }, 'Organizations');
  const { data, error, response } = await api.GET('/api/admin/organizations', { params: { query: { ...(query ? { q: query } : {}), limit: PAGE, offset } } });
  if (!data) return replace(section, title, notice(describeError(error, response.status), 'error'));
  const message = h('div', { 'aria-live': 'polite' });
  const search = h('input', { id: 'organization-search', type: 'search', value: query, placeholder: 'name contains…', autocomplete: 'off' });
  const searchForm = h('form', { class: 'inline-form', role: 'search', 'aria-label': 'Organizations' }, h('label', { for: 'organization-search' }, 'Search organizations'), search, h('button', { type: 'submit', class: 'btn' }, 'Search'));
  searchForm.addEventListener('submit', (event) => {
    event.preventDefault();
    void showOrganizations(section, search.value.trim());
  });
  const reload = () => void showOrganizations(section, query, offset);
  const setSuspended = async (org: AdminOrganization, suspend: boolean): Promise<string | undefined> => {
    const path = { params: { path: { org_id: org.org_id } } };
    const result = suspend ? await api.POST('/api/admin/organizations/{org_id}/suspend', path) : await api.POST('/api/admin/organizations/{org_id}/resume', path);
    if (!result.data) return describeError(result.error, result.response.status);
    reload();
    return undefined;
  };
  const rows = data.items.map((org) =>
    h(
      'tr',
      null,
      // A name is whatever its owner typed: text, never markup (h sets text nodes).
      h('td', { 'data-label': 'Organization' }, h('span', { class: 'strong', title: org.org_id }, org.name)),
      h('td', { 'data-label': 'State' }, badge(org.suspended ? 'suspended' : 'active'), org.personal ? [' ', badge('personal')] : null),
      h('td', { class: 'num', 'data-label': 'Members' }, String(org.member_count)),
      h('td', { 'data-label': 'Created' }, time(org.created_at)),
      h(
        'td',
        { class: 'actions' },
        org.suspended
          ? h('button', { type: 'button', class: 'btn small', onclick: () => void setSuspended(org, false).then((problem) => problem && replace(message, notice(problem, 'error'))) }, 'Resume', h('span', { class: 'visually-hidden' }, ` ${org.name}`))
          : confirmedAction({ label: 'Suspend', confirm: 'Confirm suspend', target: org.name, act: () => setSuspended(org, true) }),
      ),
    ),
  );
  const pager = h(
    'div',
    { class: 'pager' },
    offset > 0 ? h('button', { type: 'button', class: 'btn small', onclick: () => void showOrganizations(section, query, Math.max(0, offset - PAGE)) }, 'Previous') : null,
    h('span', { class: 'hint' }, `${data.total === 0 ? 0 : offset + 1}–${offset + data.items.length} of ${data.total}`),
    offset + data.items.length < data.total ? h('button', { type: 'button', class: 'btn small', onclick: () => void showOrganizations(section, query, offset + PAGE) }, 'Next') : null,
  );
  replace(
    section,
    title,
    h('p', { class: 'hint' }, 'Suspending one refuses its session API keys (401) and its members acting in it (403) within seconds; its data stays.'),
    searchForm,
    data.items.length
      ? h(
          'div',
          { class: 'table-wrap' },
          h(
            'table',
            { class: 'list compact stacked', id: 'organizations' },
            h('caption', { class: 'visually-hidden' }, 'Organizations'),
            h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Organization'), h('th', { scope: 'col' }, 'State'), h('th', { scope: 'col', class: 'num' }, 'Members'), h('th', { scope: 'col' }, 'Created'), h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Actions')))),
            h('tbody', null, rows),
          ),
        )
      : h('p', { class: 'empty' }, 'No organizations match.'),
    pager,
    message,
  );
}
