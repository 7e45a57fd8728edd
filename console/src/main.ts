import { api } from './api.ts';
import { h, replace } from './dom.ts';
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
  'not-found': (main) => replace(main, h('h1', null, 'Page not found'), h('p', null, h('a', { href: '#/conversations' }, 'Back to your conversations'))),
};

const root = document.getElementById('app')!;
let cleanup: Cleanup;
/** Whether the caller may see the admin pages; learned once per sign-in. */
let isSuperAdmin: Promise<boolean> | undefined;

function superAdmin(): Promise<boolean> {
  isSuperAdmin ??= api.GET('/api/me').then(({ data }) => data?.is_super_admin ?? false, () => false);
  return isSuperAdmin;
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
    isSuperAdmin = undefined;
    root.classList.remove('fixed-height');
    replace(root, h('main', { id: 'main', class: 'narrow' }));
    cleanup = signInPage(root.querySelector('main')!, route);
    return;
  }
  const adminLink = h('span', { class: 'nav-slot' });
  const nav = h(
    'nav',
    { 'aria-label': 'Main' },
    navLink('#/conversations', 'Conversations', route.page === 'conversations' || route.page === 'conversation'),
    navLink('#/usage', 'Usage', route.page === 'usage'),
    navLink('#/account', 'Account', route.page === 'account' || route.page === 'webhook-endpoint'),
    adminLink,
  );
  void superAdmin().then((yes) => yes && replace(adminLink, navLink('#/admin', 'Admin', route.page === 'admin')));
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
