import { api, describeError, type Schemas } from '../api.ts';
import { confirmedAction } from '../confirm.ts';
import { badge, copyButton, h, notice, replace, time } from '../dom.ts';

type AdminUser = Schemas['AdminUser'];
const PAGE = 25;

/** Users: search by e-mail, create, issue a first key, suspend/resume, make or stop being super admin. */
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
    replace(section.querySelector('[aria-live]')!, notice(`Created ${result.data.email}. Use “Issue first key” in their row to give them an access token.`));
  });
  const act = async (call: Promise<{ response: Response; error?: unknown }>) => {
    const { response: answer, error: problem } = await call;
    if (!answer.ok) return replace(message, notice(describeError(problem, answer.status), 'error'));
    void showUsers(section, query, offset);
  };
  /** Acts, then shows the list again; on failure, returns the sentence shown beside the button. */
  const confirmedCall = async (call: Promise<{ response: Response; error?: unknown }>): Promise<string | undefined> => {
    const { response: answer, error: problem } = await call;
    if (!answer.ok) return describeError(problem, answer.status);
    void showUsers(section, query, offset);
    return undefined;
  };
  const issueKey = async (user: AdminUser, button: HTMLButtonElement) => {
    button.disabled = true;
    const result = await api.POST('/api/admin/users/{user_id}/keys', { params: { path: { user_id: user.user_id } }, body: { kind: 'access_token', name: 'console sign-in' } });
    button.disabled = false;
    if (!result.data) return replace(message, notice(describeError(result.error, result.response.status), 'error'));
    replace(
      message,
      h(
        'div',
        { class: 'notice info secret-box', role: 'status' },
        h('p', null, h('strong', null, `Access token for ${user.email}.`), ' Give it to them now, over a private channel: it is shown only this once. They sign in with it here.'),
        h('div', { class: 'secret' }, h('code', { id: 'user-key-secret', tabindex: -1 }, result.data.secret), copyButton(result.data.secret)),
      ),
    );
    message.querySelector<HTMLElement>('#user-key-secret')?.focus();
  };
  const rows = data.items.map((user: AdminUser) => {
    const path = { params: { path: { user_id: user.user_id } } };
    return h(
      'tr',
      null,
      h('td', { 'data-label': 'User' }, h('span', { class: 'strong', title: user.user_id }, user.email)),
      h('td', { 'data-label': 'State' }, user.suspended ? badge('suspended') : badge('active'), user.is_super_admin ? [' ', badge('super_admin')] : null),
      h('td', { class: 'num', 'data-label': 'Tokens / keys' }, `${user.active_access_tokens} / ${user.active_session_api_keys}`),
      h('td', { 'data-label': 'Last used' }, time(user.last_used_at)),
      h(
        'td',
        { class: 'actions' },
        user.active_access_tokens === 0 && !user.suspended ? h('button', { type: 'button', class: 'btn small', onclick: (event: Event) => void issueKey(user, event.currentTarget as HTMLButtonElement) }, 'Issue first key', h('span', { class: 'visually-hidden' }, ` for ${user.email}`)) : null,
        user.suspended
          ? h('button', { type: 'button', class: 'btn small', onclick: () => void act(api.POST('/api/admin/users/{user_id}/resume', path)) }, 'Resume', h('span', { class: 'visually-hidden' }, ` ${user.email}`))
          : confirmedAction({ label: 'Suspend', confirm: 'Confirm suspend', target: user.email, act: () => confirmedCall(api.POST('/api/admin/users/{user_id}/suspend', path)) }),
        user.is_super_admin
          ? confirmedAction({ label: 'Remove super admin', confirm: 'Confirm removal', target: user.email, act: () => confirmedCall(api.DELETE('/api/admin/super-admins/{user_id}', path)) })
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
            { class: 'list compact stacked', id: 'users' },
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
