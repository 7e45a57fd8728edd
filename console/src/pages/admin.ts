import { api, describeError, type Schemas } from '../api.ts';
import { confirmedAction } from '../confirm.ts';
import { badge, h, notice, replace } from '../dom.ts';
import type { Page } from '../main.ts';
import { showOrganizations } from './admin-organizations.ts';
import { showUsers } from './admin-users.ts';
import { showAuditLog } from './audit.ts';
import { showRefusedDeliveries } from './refused-deliveries.ts';

/** Administration for super admins: users, organizations, super admins, verified models, refused deliveries, the audit log. */
export const adminPage: Page = (main) => {
  const users = h('section', { class: 'card stack', 'aria-labelledby': 'users-title' });
  const organizations = h('section', { class: 'card stack', 'aria-labelledby': 'organizations-title', id: 'organizations-admin' });
  const models = h('section', { class: 'card stack', 'aria-labelledby': 'models-title' });
  const admins = h('section', { class: 'card stack', 'aria-labelledby': 'admins-title' });
  const audit = h('section', { class: 'card stack', 'aria-labelledby': 'audit-title' });
  const refused = h('section', { class: 'card stack', 'aria-labelledby': 'refused-title', id: 'refused' });
  replace(main, h('div', { class: 'page-head' }, h('h1', null, 'Administration')), h('div', { class: 'stack' }, users, organizations, h('div', { class: 'grid' }, admins, models), refused, audit));
  void showUsers(users);
  void showOrganizations(organizations);
  void showModels(models);
  void showSuperAdmins(admins);
  void showRefusedDeliveries(refused);
  void showAuditLog(audit);
};

async function showModels(section: HTMLElement): Promise<void> {
  const title = h('h2', { id: 'models-title' }, 'Verified models');
  const { data, error, response } = await api.GET('/api/admin/verified-models', { params: { query: { limit: 200 } } });
  if (!data) return replace(section, title, notice(describeError(error, response.status), 'error'));
  const provider = h('input', { id: 'model-provider', name: 'provider', required: true, maxlength: 100, autocomplete: 'off' });
  const name = h('input', { id: 'model-name', name: 'model_name', required: true, maxlength: 255, autocomplete: 'off' });
  const message = h('div', { 'aria-live': 'polite' });
  const form = h(
    'form',
    { class: 'form-grid', id: 'add-model' },
    h('div', null, h('label', { for: 'model-provider' }, 'Provider'), provider),
    h('div', null, h('label', { for: 'model-name' }, 'Model'), name),
    h('button', { type: 'submit', class: 'btn primary' }, 'Add model'),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const result = await api.POST('/api/admin/verified-models', { body: { provider: provider.value, model_name: name.value, is_enabled: true } });
    if (!result.data) return replace(message, notice(describeError(result.error, result.response.status), 'error'));
    void showModels(section);
  });
  replace(
    section,
    title,
    h('p', { class: 'hint' }, `${data.total} model${data.total === 1 ? '' : 's'}`),
    data.items.length ? modelTable(data.items, () => void showModels(section), message) : h('p', { class: 'empty' }, 'No verified models yet.'),
    form,
    message,
  );
}

function modelTable(models: Schemas['VerifiedModel'][], reload: () => void, message: HTMLElement): HTMLElement {
  const toggle = async (model: Schemas['VerifiedModel']) => {
    const result = await api.PATCH('/api/admin/verified-models/{model_id}', { params: { path: { model_id: model.id } }, body: { is_enabled: !model.is_enabled } });
    if (!result.data) return replace(message, notice(describeError(result.error, result.response.status), 'error'));
    reload();
  };
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { class: 'list compact stacked' },
      h('caption', { class: 'visually-hidden' }, 'Verified models'),
      h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Provider'), h('th', { scope: 'col' }, 'Model'), h('th', { scope: 'col' }, 'State'), h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Actions')))),
      h(
        'tbody',
        null,
        models.map((model) =>
          h(
            'tr',
            null,
            h('td', null, model.provider),
            h('td', null, h('code', null, model.model_name)),
            h('td', null, badge(model.is_enabled ? 'enabled' : 'disabled')),
            h('td', null, h('button', { type: 'button', class: 'btn small', onclick: () => void toggle(model) }, model.is_enabled ? 'Disable' : 'Enable', h('span', { class: 'visually-hidden' }, ` ${model.model_name}`))),
          ),
        ),
      ),
    ),
  );
}

async function showSuperAdmins(section: HTMLElement): Promise<void> {
  const title = h('h2', { id: 'admins-title' }, 'Super admins');
  const { data, error, response } = await api.GET('/api/admin/super-admins');
  if (!data) return replace(section, title, notice(describeError(error, response.status), 'error'));
  const message = h('div', { 'aria-live': 'polite' });
  const email = h('input', { id: 'grant-email', type: 'email', required: true, autocomplete: 'off', maxlength: 320 });
  const form = h('form', { class: 'form-grid', id: 'grant-super-admin' }, h('div', null, h('label', { for: 'grant-email' }, 'Make super admin (e-mail)'), email), h('button', { type: 'submit', class: 'btn' }, 'Grant'));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const result = await api.POST('/api/admin/super-admins', { body: { email: email.value } });
    if (!result.data) return replace(message, notice(describeError(result.error, result.response.status), 'error'));
    void showSuperAdmins(section);
  });
  const revoke = async (admin: Schemas['SuperAdmin']): Promise<string | undefined> => {
    const result = await api.DELETE('/api/admin/super-admins/{user_id}', { params: { path: { user_id: admin.user_id } } });
    if (!result.response.ok) return describeError(result.error, result.response.status);
    void showSuperAdmins(section);
    return undefined;
  };
  replace(
    section,
    title,
    h(
      'ul',
      { class: 'plain-list' },
      data.super_admins.map((admin) =>
        h('li', { class: 'section-head' }, h('strong', null, admin.email), confirmedAction({ label: 'Revoke', confirm: 'Confirm revoke', target: admin.email, act: () => revoke(admin) })),
      ),
    ),
    form,
    message,
  );
}
