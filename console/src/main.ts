import { h, replace } from './dom.ts';
import { can, forgetMe, me, switchOrg } from './me.ts';
import { currentRoute, type Route } from './router.ts';
import { accessToken, onSessionChange, signOut } from './session.ts';
import { signInPage } from './pages/sign-in.ts';
import { conversationsPage } from './pages/conversations.ts';
import { conversationPage } from './pages/conversation.ts';
import { accountPage } from './pages/account.ts';
import { usagePage } from './pages/usage.ts';
import { adminPage } from './pages/admin.ts';
import { webhookEndpointPage } from './pages/webhook-endpoint.ts';
import { showBudgetBanner } from './pages/budget.ts';
import { invitationPage, membersPage } from './pages/members.ts';

/** What a page returns: called when the user leaves it (closes streams, timers). */
export type Cleanup = (() => void) | void;
/** Every page is a module with this one entry point. */
export type Page = (main: HTMLElement, route: Route) => Cleanup;

const PAGES: Record<Route['page'], Page> = {
  conversations: conversationsPage,
  conversation: conversationPage,
  usage: usagePage,
  account: accountPage,
  'webhook-endpoint': webhookEndpointPage,
  admin: adminPage,
  members: membersPage,
  invitation: invitationPage,
  'not-found': (main) => replace(main, h('h1', null, 'Page not found'), h('p', null, h('a', { href: '#/conversations' }, 'Back to your conversations'))),
};

const root = document.getElementById('app')!;
let cleanup: Cleanup;

/** The organization switcher: only for someone in more than one organization (a single user sees none). */
function orgSwitcher(slot: HTMLElement): void {
  void me().then((user) => {
    if (!user || user.organizations.length < 2) return;
    const select = h(
      'select',
      { id: 'org-switcher', class: 'org-switcher' },
      user.organizations.map((org) => h('option', { value: org.id, selected: org.id === user.org_id }, org.personal ? `${org.name} (personal)` : org.name)),
    );
    select.addEventListener('change', () => switchOrg(select.value));
    replace(slot, h('label', { for: 'org-switcher', class: 'visually-hidden' }, 'Organization'), select);
  });
}

function navLink(href: string, label: string, active: boolean): HTMLElement {
  return h('a', { href, class: 'nav-link', 'aria-current': active ? 'page' : null }, label);
}

/** The conversation shown, so that a link to one of its events moves within it instead of reopening it. */
let shownConversation: string | undefined;

function render(): void {
  const route = currentRoute();
  if (route.page === 'conversation' && route.id === shownConversation && route.seq && accessToken()) {
    window.dispatchEvent(new CustomEvent('console:show-event', { detail: route.seq }));
    return;
  }
  shownConversation = route.page === 'conversation' && accessToken() ? route.id : undefined;
  cleanup?.();
  cleanup = undefined;
  if (!accessToken()) {
    forgetMe();
    root.classList.remove('fixed-height');
    replace(root, h('main', { id: 'main', class: 'narrow' }));
    cleanup = signInPage(root.querySelector('main')!, route);
    return;
  }
  const adminLink = h('span', { class: 'nav-slot' });
  // Usage is billing: not offered to a role without VIEW_BILLING (a viewer).
  const usageLink = navLink('#/usage', 'Usage', route.page === 'usage');
  const nav = h(
    'nav',
    { 'aria-label': 'Main' },
    navLink('#/conversations', 'Conversations', route.page === 'conversations' || route.page === 'conversation'),
    usageLink,
    navLink('#/members', 'Members', route.page === 'members'),
    navLink('#/account', 'Account', route.page === 'account' || route.page === 'webhook-endpoint'),
    adminLink,
  );
  void me().then((user) => {
    if (user?.is_super_admin) replace(adminLink, navLink('#/admin', 'Admin', route.page === 'admin'));
    if (user && !can(user, 'VIEW_BILLING')) usageLink.remove();
  });
  const switcher = h('span', { class: 'org-slot' });
  orgSwitcher(switcher);
  const main = h('main', { id: 'main', tabindex: -1, class: route.page === 'conversation' ? 'wide' : '' });
  const budgetBanner = h('div', { class: 'banner-slot' });
  // The viewer scrolls its events, not the page: the page is exactly the window's height.
  root.classList.toggle('fixed-height', route.page === 'conversation');
  replace(
    root,
    h('a', { href: '#main', class: 'skip-link', onclick: (event: Event) => (event.preventDefault(), main.focus()) }, 'Skip to content'),
    h(
      'header',
      { class: 'topbar' },
      h('a', { href: '#/conversations', class: 'brand' }, 'Agent Platform'),
      switcher,
      nav,
      h('button', { type: 'button', class: 'btn small quiet', id: 'sign-out', onclick: () => signOut('You have signed out.') }, 'Sign out'),
    ),
    budgetBanner,
    main,
  );
  void showBudgetBanner(budgetBanner);
  cleanup = PAGES[route.page](main, route);
}

window.addEventListener('hashchange', render);
onSessionChange(render);
render();
