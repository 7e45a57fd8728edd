import { api, describeError, type Schemas } from '../api.ts';
import { badge, h, notice, replace, time } from '../dom.ts';

type AdminUser = Schemas['AdminUser'];
const PAGE = 25;

/** Users: search by e-mail, create, suspend/resume, make or stop being super admin. */
export async function showUsers(section: HTMLElement, query = '', offset = 0): Promise<void> {
  const title = h('h2', { id: 'users-title' }, 'Users');
  const { data, error, response } = await api.GET('/api/admin/users', { params: { query: { ...(query ? { q: query } : {}), limit: PAGE, offset } } });
  if (!data) return replace(section, title, notice(describeError(error, response.status), 'error'));
  const message = h('div', { 'aria-live': 'polite' });
  const search = h('input', { id: 'user-search', type: 'search', value: query, placeholder: 'e-mail contains…', autocomplete: 'off' });
  const searchForm = h('form', { class: 'inline-form', role: 'search', 'aria-label': 'Users' }, h('label', { for: 'user-search' }, 'Search users'), search, h('button', { type: 'submit', class: 'btn' }, 'Search'));
  searchForm.addEventListener('submit', (event) => {
    event.preventDefault();
    void showUsers(section, search.value.trim());
  });
  const email = h('input', { id: 'new-user-email', type: 'email', required: true, autocomplete: 'off', maxlength: 320 });
  const createForm = h('form', { class: 'inline-form', id: 'create-user' }, h('label', { for: 'new-user-email' }, 'New user e-mail'), email, h('button', { type: 'submit', class: 'btn primary' }, 'Create user'));
  createForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    const result = await api.POST('/api/admin/users', { body: { email: email.value } });
    if (!result.data) return replace(message, notice(describeError(result.error, result.response.status), 'error'));
    await showUsers(section, query, offset);
    replace(section.querySelector('[aria-live]')!, notice(`Created ${result.data.email}. Issue their first key with: npm run admin -- create-token --email ${result.data.email}`));
  });
  const act = async (call: Promise<{ response: Response; error?: unknown }>) => {
    const { response: answer, error: problem } = await call;
    if (!answer.ok) return replace(message, notice(describeError(problem, answer.status), 'error'));
    void showUsers(section, query, offset);
  };
  const rows = data.items.map((user: AdminUser) => {
    const path = { params: { path: { user_id: user.user_id } } };
    return h(
      'tr',
      null,
      h('td', null, h('span', { class: 'strong' }, user.email), h('br'), h('span', { class: 'hint' }, user.user_id)),
      h('td', null, user.suspended ? badge('suspended') : badge('active'), user.is_super_admin ? [' ', badge('super_admin')] : null),
      h('td', { class: 'num' }, `${user.active_access_tokens} / ${user.active_session_api_keys}`),
      h('td', null, time(user.last_used_at)),
      h(
        'td',
        { class: 'actions' },
        user.suspended
          ? h('button', { type: 'button', class: 'btn small', onclick: () => void act(api.POST('/api/admin/users/{user_id}/resume', path)) }, 'Resume', h('span', { class: 'visually-hidden' }, ` ${user.email}`))
          : h('button', { type: 'button', class: 'btn small danger', onclick: () => void act(api.POST('/api/admin/users/{user_id}/suspend', path)) }, 'Suspend', h('span', { class: 'visually-hidden' }, ` ${user.email}`)),
        user.is_super_admin
          ? h('button', { type: 'button', class: 'btn small', onclick: () => void act(api.DELETE('/api/admin/super-admins/{user_id}', path)) }, 'Remove super admin', h('span', { class: 'visually-hidden' }, ` ${user.email}`))
          : h('button', { type: 'button', class: 'btn small', onclick: () => void act(api.POST('/api/admin/super-admins', { body: { user_id: user.user_id } })) }, 'Make super admin', h('span', { class: 'visually-hidden' }, ` ${user.email}`)),
      ),
    );
  });
  const pager = h(
    'div',
    { class: 'pager' },
    offset > 0 ? h('button', { type: 'button', class: 'btn small', onclick: () => void showUsers(section, query, Math.max(0, offset - PAGE)) }, 'Previous') : null,
    h('span', { class: 'hint' }, `${data.total === 0 ? 0 : offset + 1}–${offset + data.items.length} of ${data.total}`),
    offset + data.items.length < data.total ? h('button', { type: 'button', class: 'btn small', onclick: () => void showUsers(section, query, offset + PAGE) }, 'Next') : null,
  );
  replace(
    section,
    title,
    searchForm,
    data.items.length
      ? h(
          'div',
          { class: 'table-wrap' },
          h(
            'table',
            { class: 'list compact', id: 'users' },
            h('caption', { class: 'visually-hidden' }, 'Users'),
            h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'User'), h('th', { scope: 'col' }, 'State'), h('th', { scope: 'col', class: 'num' }, 'Tokens / keys'), h('th', { scope: 'col' }, 'Last used'), h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Actions')))),
            h('tbody', null, rows),
          ),
        )
      : h('p', { class: 'empty' }, 'No users match.'),
    pager,
    createForm,
    message,
  );
}
