import createClient from 'openapi-fetch';
import type { components, paths } from '../../generated/openapi.ts';
import { badge, h, money, notice, replace, time } from './dom.ts';
import { duration } from './viewer/cards/common.ts';
import { PAGE, ViewerFeed } from './viewer/feed.ts';
import { ConversationRows, type StoredEvent } from './viewer/rows.ts';

/**
 * The shared page (`/share/{token}`): the console's viewer, read-only, for someone without an
 * account. No credentials are sent and nothing links into the console; the token is the address's
 * last segment, and every request goes to the shared API with it.
 */

type SharedConversation = components['schemas']['SharedConversation'];

const api = createClient<paths>({ baseUrl: location.origin });
const token = decodeURIComponent(location.pathname.split('/').filter(Boolean).pop() ?? '');
const root = document.getElementById('app')!;
root.classList.add('fixed-height');

const feed = new ViewerFeed(new ConversationRows('shared', (seq) => `#events/${seq}`), eventsBefore);
const header = h('header', { class: 'conversation-head' }, h('h1', { id: 'conversation-title' }, 'Shared conversation'));
const problems = h('div', { 'aria-live': 'polite' });
const main = h('main', { id: 'main', class: 'wide', tabindex: -1 }, header, problems, h('div', { class: 'viewer-body' }, feed.outline.element, feed.list.element));
replace(
  root,
  h('header', { class: 'topbar' }, h('span', { class: 'brand' }, 'Agent Platform'), h('span', { class: 'shared-note' }, 'Shared conversation · read-only')),
  main,
);

function fact(label: string, value: Node | string): HTMLElement {
  return h('div', null, h('dt', null, label), h('dd', null, value));
}

function showHeader(conversation: SharedConversation): void {
  const title = conversation.title?.trim() || 'Untitled conversation';
  document.title = `${title} · Shared · Agent Platform`;
  const usage = conversation.metrics?.accumulated_token_usage;
  const tokens = usage ? `${(usage.prompt_tokens ?? 0).toLocaleString()} / ${(usage.completion_tokens ?? 0).toLocaleString()}` : '–';
  const last = conversation.last_event_at ? Date.parse(conversation.last_event_at) : NaN;
  const tags = Object.entries(conversation.tags ?? {});
  replace(
    header,
    h('div', { class: 'title-line' }, h('h1', { id: 'conversation-title' }, title), h('span', { id: 'live-status' }, badge(conversation.execution_status))),
    h(
      'dl',
      { class: 'facts' },
      fact('Cost', money(conversation.accumulated_cost_usd, conversation.accumulated_cost_micro_usd)),
      fact('Duration', Number.isFinite(last) ? duration(last - Date.parse(conversation.created_at)) : '–'),
      fact('Events stored', conversation.event_count.toLocaleString()),
      fact('Tokens in / out', tokens),
      fact('Model', conversation.metrics?.model_name ?? '–'),
      fact('Started', time(conversation.created_at)),
      fact('Last event', time(conversation.last_event_at)),
      conversation.expires_at ? fact('Link expires', time(conversation.expires_at)) : null,
    ),
    tags.length ? h('p', { class: 'chips' }, ...tags.map(([key, value]) => h('span', { class: 'chip' }, `${key}: ${value}`))) : null,
  );
}

function gone(): void {
  root.classList.remove('fixed-height');
  replace(
    main,
    h('section', { class: 'card share-gone' }, h('h1', null, 'This link is no longer available'), h('p', null, 'The conversation shared at this address cannot be shown: the link was revoked by its owner, has expired, or never existed.')),
  );
  main.className = 'narrow';
}

/** The page of events before `beforeSeq`, in sequence order; undefined when it could not be read. */
async function eventsBefore(beforeSeq: number | undefined, limit: number): Promise<StoredEvent[] | undefined> {
  const { data, response } = await api.GET('/api/v1/shared/{token}/events', {
    params: { path: { token }, query: { order: 'desc', limit, ...(beforeSeq ? { before_seq: beforeSeq } : {}) } },
  });
  if (response.status === 404) gone();
  return data?.items.reverse();
}

/** Scrolls to event `seq`; hidden events are not there to find. */
async function showEvent(seq: number): Promise<void> {
  if (!(await feed.showEvent(seq))) replace(problems, notice(`Event #${seq} is not shown on this page.`, 'error'));
}

const linkedSeq = (): number | undefined => {
  const match = /^#events\/([1-9]\d{0,15})$/.exec(location.hash);
  return match ? Number(match[1]) : undefined;
};
window.addEventListener('hashchange', () => {
  const seq = linkedSeq();
  if (seq) void showEvent(seq);
});

void (async () => {
  const { data, error, response } = await api.GET('/api/v1/shared/{token}', { params: { path: { token } } });
  if (!data) {
    if (response.status === 404) return gone();
    return replace(problems, notice((error as { detail?: string } | undefined)?.detail ?? 'The server could not answer; try again in a moment.', 'error'));
  }
  showHeader(data);
  const events = await eventsBefore(undefined, PAGE);
  if (!events) return;
  feed.open(events);
  const seq = linkedSeq();
  if (seq) void showEvent(seq);
})();
