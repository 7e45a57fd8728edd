import { api, describeError, type Schemas } from '../api.ts';
import { confirmedAction } from '../confirm.ts';
import { copyButton, h, notice, replace, time } from '../dom.ts';
import type { Page } from '../main.ts';
import { can, me, switchOrg } from '../me.ts';

type Me = Schemas['Me'];
type Role = Schemas['OrgRole'];

const ROLES: { value: Role; label: string }[] = [
  { value: 'owner', label: 'Owner' },
  { value: 'admin', label: 'Admin' },
  { value: 'member', label: 'Member' },
  { value: 'viewer', label: 'Viewer' },
];

/** Members: the organization acted in, its members and pending invitations, and a new organization. Only what the role allows is offered. */
export const membersPage: Page = (main) => {
  const head = h('div', { class: 'page-head' }, h('h1', null, 'Members'));
  const members = h('section', { class: 'card stack', 'aria-labelledby': 'members-title' });
  const invitations = h('section', { class: 'card stack', 'aria-labelledby': 'invitations-title' });
  const create = h('section', { class: 'card stack', 'aria-labelledby': 'new-org-title' });
  const settings = h('section', { class: 'card stack', 'aria-labelledby': 'org-settings-title' });
  replace(main, head, h('div', { class: 'stack' }, members, invitations, settings, create));
  showNewOrganization(create);
  void me().then((user) => {
    if (!user) return replace(members, notice('Your account could not be loaded; try again in a moment.', 'error'));
    const org = user.organizations.find((o) => o.id === user.org_id);
    replace(head, h('h1', null, org?.name ?? 'Members'), h('p', { class: 'hint', id: 'org-role' }, org?.personal ? 'Your personal organization' : `Your role: ${user.org_role}`));
    if (org?.personal) {
      replace(members, h('h2', { id: 'members-title' }, 'Members'), h('p', null, 'This is your personal organization: only you belong to it. Create an organization below to share conversations, keys and credits with others.'));
      invitations.remove();
      return;
    }
    void showMembers(members, user);
    if (can(user, 'MANAGE_MEMBERS')) void showInvitations(invitations, user);
    else invitations.remove();
    if (org && can(user, 'MANAGE_ORGANIZATION')) showSettings(settings, user, org);
    else settings.remove();
  });
};

/** Rename (MANAGE_ORGANIZATION) and, for owners, delete the organization acted in. */
function showSettings(section: HTMLElement, user: Me, org: Schemas['Organization']): void {
  const name = h('input', { id: 'rename-org', name: 'name', required: true, maxlength: 100, autocomplete: 'off', value: org.name });
  const message = h('div', { 'aria-live': 'polite' });
  const form = h('form', { class: 'inline-form', id: 'rename-org-form' }, h('label', { for: 'rename-org' }, 'Name'), name, h('button', { type: 'submit', class: 'btn' }, 'Rename'));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const result = await api.PATCH('/api/orgs/{org_id}', { params: { path: { org_id: org.id } }, body: { name: name.value } });
    if (!result.data) return replace(message, notice(describeError(result.error, result.response.status), 'error'));
    switchOrg(org.id);
  });
  const remove = can(user, 'DELETE_ORGANIZATION')
    ? h(
        'div',
        { id: 'delete-org' },
        h('p', { class: 'hint' }, 'Deleting is possible only while it holds no conversations; its keys, endpoints and credits go with it.'),
        confirmedAction({
          label: 'Delete organization',
          confirm: 'Confirm delete',
          target: org.name,
          act: async () => {
            const reply = await api.DELETE('/api/orgs/{org_id}', { params: { path: { org_id: org.id } } });
            if (!reply.response.ok) return describeError(reply.error, reply.response.status);
            switchOrg(user.user_id);
            return undefined;
          },
        }),
      )
    : null;
  replace(section, h('h2', { id: 'org-settings-title' }, 'Organization'), form, message, remove);
}

async function showMembers(section: HTMLElement, user: Me): Promise<void> {
  const title = h('h2', { id: 'members-title' }, 'Members');
  const { data, error, response } = await api.GET('/api/orgs/{org_id}/members', { params: { path: { org_id: user.org_id } } });
  if (!data) return replace(section, title, notice(describeError(error, response.status), 'error'));
  const manage = can(user, 'MANAGE_MEMBERS');
  const owners = can(user, 'MANAGE_OWNERS');
  const lastOwner = data.members.filter((member) => member.role === 'owner').length === 1;
  const rows = data.members.map((member) => {
    const self = member.user_id === user.user_id;
    // The last owner can be neither demoted nor removed (409): not offered.
    const fixed = lastOwner && member.role === 'owner';
    // An admin may not touch an owner, nor make one: offered only to owners.
    const mayChange = manage && !fixed && (owners || member.role !== 'owner');
    const role = mayChange ? roleSelect(member, user, owners, section) : h('span', { class: 'badge' }, member.role);
    let remove: HTMLElement | null = null;
    if (self && !fixed) remove = confirmedAction({ label: 'Leave', confirm: 'Confirm leave', target: 'this organization', act: () => removeMember(user, member, section) });
    else if (mayChange) remove = confirmedAction({ label: 'Remove', confirm: 'Confirm remove', target: member.email, act: () => removeMember(user, member, section) });
    return h(
      'tr',
      null,
      h('td', { 'data-label': 'E-mail', class: 'title' }, h('span', { class: 'member-email' }, member.email, self ? h('span', { class: 'hint' }, ' (you)') : null)),
      h('td', { 'data-label': 'Role' }, role),
      h('td', { 'data-label': 'Joined' }, time(member.joined_at)),
      h('td', { class: 'actions' }, remove),
    );
  });
  replace(
    section,
    title,
    h(
      'div',
      { class: 'table-wrap' },
      h(
        'table',
        { class: 'list compact stacked', id: 'members' },
        h('caption', { class: 'visually-hidden' }, 'Members of this organization'),
        h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'E-mail'), h('th', { scope: 'col' }, 'Role'), h('th', { scope: 'col' }, 'Joined'), h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Actions')))),
        h('tbody', null, rows),
      ),
    ),
  );
}

function roleSelect(member: Schemas['OrganizationMember'], user: Me, owners: boolean, section: HTMLElement): HTMLElement {
  const id = `role-${member.user_id}`;
  const select = h(
    'select',
    { id, class: 'role-select' },
    ROLES.filter((role) => owners || role.value !== 'owner').map((role) => h('option', { value: role.value, selected: role.value === member.role }, role.label)),
  );
  const problem = h('span', { class: 'row-error', role: 'alert' });
  select.addEventListener('change', async () => {
    const result = await api.PATCH('/api/orgs/{org_id}/members/{user_id}', {
      params: { path: { org_id: user.org_id, user_id: member.user_id } },
      body: { role: select.value as Role },
    });
    if (!result.data) {
      select.value = member.role;
      problem.textContent = describeError(result.error, result.response.status);
      return;
    }
    // One's own role changed what one may do here.
    if (member.user_id === user.user_id) return switchOrg(user.org_id);
    void showMembers(section, user);
  });
  return h('span', { class: 'row-action' }, h('label', { for: id, class: 'visually-hidden' }, `Role of ${member.email}`), select, problem);
}

async function removeMember(user: Me, member: Schemas['OrganizationMember'], section: HTMLElement): Promise<string | undefined> {
  const leaving = member.user_id === user.user_id;
  const { response, error } = leaving
    ? await api.DELETE('/api/orgs/{org_id}/membership', { params: { path: { org_id: user.org_id } } })
    : await api.DELETE('/api/orgs/{org_id}/members/{user_id}', { params: { path: { org_id: user.org_id, user_id: member.user_id } } });
  if (!response.ok) return describeError(error, response.status);
  if (leaving) {
    // Left: back to the default organization.
    switchOrg(user.default_org_id === user.org_id ? user.user_id : user.default_org_id);
    return undefined;
  }
  void showMembers(section, user);
  return undefined;
}

async function showInvitations(section: HTMLElement, user: Me, created?: Schemas['CreatedInvitation']): Promise<void> {
  const title = h('h2', { id: 'invitations-title' }, 'Invitations');
  const { data, error, response } = await api.GET('/api/orgs/{org_id}/invitations', { params: { path: { org_id: user.org_id } } });
  if (!data) return replace(section, title, notice(describeError(error, response.status), 'error'));
  const email = h('input', { id: 'invite-email', name: 'email', type: 'email', required: true, maxlength: 320, autocomplete: 'off', placeholder: 'name@example.com' });
  const role = h(
    'select',
    { id: 'invite-role', name: 'role' },
    ROLES.filter((r) => can(user, 'MANAGE_OWNERS') || r.value !== 'owner').map((r) => h('option', { value: r.value, selected: r.value === 'member' }, r.label)),
  );
  const message = h('div', { 'aria-live': 'polite' });
  const form = h(
    'form',
    { class: 'form-grid', id: 'invite' },
    h('div', null, h('label', { for: 'invite-email' }, 'E-mail'), email),
    h('div', null, h('label', { for: 'invite-role' }, 'Role'), role),
    h('button', { type: 'submit', class: 'btn primary' }, 'Invite'),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const result = await api.POST('/api/orgs/{org_id}/invitations', {
      params: { path: { org_id: user.org_id } },
      body: { email: email.value, role: role.value as Role },
    });
    if (!result.data) return replace(message, notice(describeError(result.error, result.response.status), 'error'));
    void showInvitations(section, user, result.data);
  });
  const rows = data.invitations.map((invitation) =>
    h(
      'tr',
      null,
      h('td', { 'data-label': 'E-mail', class: 'title' }, invitation.email),
      h('td', { 'data-label': 'Role' }, invitation.role),
      h('td', { 'data-label': 'Expires' }, time(invitation.expires_at)),
      h(
        'td',
        { class: 'actions' },
        confirmedAction({
          label: 'Revoke',
          confirm: 'Confirm revoke',
          target: `the invitation of ${invitation.email}`,
          act: async () => {
            const reply = await api.DELETE('/api/orgs/{org_id}/invitations/{invitation_id}', { params: { path: { org_id: user.org_id, invitation_id: invitation.id } } });
            if (!reply.response.ok) return describeError(reply.error, reply.response.status);
            void showInvitations(section, user);
            return undefined;
          },
        }),
      ),
    ),
  );
  replace(
    section,
    title,
    created ? invitationLink(created) : null,
    rows.length
      ? h(
          'div',
          { class: 'table-wrap' },
          h(
            'table',
            { class: 'list compact stacked', id: 'invitations' },
            h('caption', { class: 'visually-hidden' }, 'Pending invitations'),
            h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'E-mail'), h('th', { scope: 'col' }, 'Role'), h('th', { scope: 'col' }, 'Expires'), h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Actions')))),
            h('tbody', null, rows),
          ),
        )
      : h('p', { class: 'empty' }, 'No pending invitations.'),
    h('h3', null, 'Invite someone'),
    form,
    message,
  );
  if (created) section.querySelector<HTMLElement>('#invitation-link')?.focus();
}

/** The new invitation's link: shown this once, never again (only its hash is kept). */
function invitationLink(invitation: Schemas['CreatedInvitation']): HTMLElement {
  const link = `${location.origin}/#/invitations/${invitation.token}`;
  return h(
    'div',
    { class: 'notice info secret-box', role: 'status' },
    h('p', null, h('strong', null, `${invitation.email} is invited as ${invitation.role}.`), ' Send them this link now: it is shown only this once. They sign in with their own access token and accept.'),
    h('div', { class: 'secret' }, h('code', { id: 'invitation-link', tabindex: -1 }, link), copyButton(link)),
    h('p', { class: 'hint' }, 'Expires ', time(invitation.expires_at), '.'),
  );
}

function showNewOrganization(section: HTMLElement): void {
  const name = h('input', { id: 'org-name', name: 'name', required: true, maxlength: 100, autocomplete: 'off', placeholder: 'e.g. Acme research' });
  const message = h('div', { 'aria-live': 'polite' });
  const form = h('form', { class: 'inline-form', id: 'create-org' }, h('label', { for: 'org-name' }, 'Name'), name, h('button', { type: 'submit', class: 'btn' }, 'Create organization'));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const result = await api.POST('/api/orgs', { body: { name: name.value } });
    if (!result.data) return replace(message, notice(describeError(result.error, result.response.status), 'error'));
    switchOrg(result.data.id);
  });
  replace(section, h('h2', { id: 'new-org-title' }, 'New organization'), h('p', { class: 'hint' }, 'You become its owner, and can invite others to it.'), form, message);
}

/** `#/invitations/{token}`: accepts the invitation as the signed-in user, then acts in its organization. */
export const invitationPage: Page = (main, route) => {
  const status = h('div', { 'aria-live': 'polite' }, h('p', { class: 'hint' }, 'Accepting the invitation…'));
  replace(main, h('div', { class: 'page-head' }, h('h1', null, 'Invitation')), h('section', { class: 'card stack' }, status));
  void api.POST('/api/invitations/{token}/accept', { params: { path: { token: route.id ?? '' } } }).then(({ data, error, response }) => {
    if (!data) {
      return replace(status, notice(describeError(error, response.status), 'error'), h('p', null, h('a', { href: '#/conversations' }, 'Back to your conversations')));
    }
    // The token leaves the address bar and the history; the organization joined is the one acted in.
    history.replaceState(null, '', '#/conversations');
    switchOrg(data.id);
  });
};
