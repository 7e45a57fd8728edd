import createClient from 'openapi-fetch';
import type { components, paths } from '../../generated/openapi.ts';
import { badge, h, money, notice, replace, time } from './dom.ts';
import { duration } from './viewer/cards/common.ts';
import { Outline } from './viewer/outline.ts';
import { renderRow } from './viewer/render.ts';
import { ConversationRows, type GapRow, type Row, type StoredEvent } from './viewer/rows.ts';
import { VirtualList } from './viewer/virtual-list.ts';

/**
 * The shared page (`/share/{token}`): the console's viewer, read-only, for someone without an
 * account. No credentials are sent and nothing links into the console; the token is the address's
 * last segment, and every request goes to the shared API with it.
 */

type SharedConversation = components['schemas']['SharedConversation'];
const PAGE = 100;
const SEEK_PAGE = 1000;

const api = createClient<paths>({ baseUrl: location.origin });
const token = decodeURIComponent(location.pathname.split('/').filter(Boolean).pop() ?? '');
const root = document.getElementById('app')!;
root.classList.add('fixed-height');

const rows = new ConversationRows('shared', (seq) => `#events/${seq}`);
const older: GapRow = { key: 'older', type: 'older', state: 'more' };
const list = new VirtualList<Row>((row) => renderRow(row, rows, () => void loadOlder()), () => void loadOlder(), 'Conversation events');
const outline = new Outline(rows, (seq) => void showEvent(seq));
const header = h('header', { class: 'conversation-head' }, h('h1', { id: 'conversation-title' }, 'Shared conversation'));
const problems = h('div', { 'aria-live': 'polite' });
const main = h('main', { id: 'main', class: 'wide', tabindex: -1 }, header, problems, h('div', { class: 'viewer-body' }, outline.element, list.element));
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
async function eventsBefore(beforeSeq?: number, limit = PAGE): Promise<StoredEvent[] | undefined> {
  const { data, response } = await api.GET('/api/v1/shared/{token}/events', {
    params: { path: { token }, query: { order: 'desc', limit, ...(beforeSeq ? { before_seq: beforeSeq } : {}) } },
  });
  if (response.status === 404) gone();
  return data?.items.reverse();
}

function addEvents(events: StoredEvent[], where: 'start' | 'end'): void {
  const updated = new Set<string>();
  const orphans = new Set<string>();
  const added = rows.add(events, updated, orphans);
  for (const key of orphans) list.remove(key);
  if (where === 'start') list.prepend(added);
  else list.append(added);
  for (const key of updated) list.refresh(key);
  outline.update();
}

let loadingOlder: Promise<boolean> | undefined;
function loadOlder(limit = PAGE): Promise<boolean> {
  if (older.state === 'start' || rows.firstSeq <= 1) return Promise.resolve(false);
  loadingOlder ??= (async () => {
    older.state = 'loading';
    list.refresh('older');
    const events = await eventsBefore(rows.firstSeq, limit);
    if (!events?.length) {
      older.state = events ? 'start' : 'error';
      list.refresh('older');
      return false;
    }
    list.remove('older');
    addEvents(events, 'start');
    older.state = 'more';
    list.prepend([older]);
    return true;
  })().finally(() => (loadingOlder = undefined));
  return loadingOlder;
}

/** Scrolls to event `seq`, loading older pages up to it; hidden events are not there to find. */
async function showEvent(seq: number): Promise<void> {
  while (!rows.keyOf(seq) && rows.firstSeq > seq && (await loadOlder(Math.min(SEEK_PAGE, rows.firstSeq - seq + PAGE))));
  const key = rows.keyOf(seq);
  if (!key) return replace(problems, notice(`Event #${seq} is not shown on this page.`, 'error'));
  focusRow(key);
}

let currentKey: string | undefined;
function focusRow(key: string): void {
  const element = list.scrollToKey(key);
  currentKey = key;
  main.querySelector('.row.current')?.classList.remove('current');
  element?.classList.add('current');
  element?.focus({ preventScroll: true });
}

/** j / k: the next or previous step, as in the console's viewer. */
document.addEventListener('keydown', (event) => {
  if (event.altKey || event.ctrlKey || event.metaKey || (event.key !== 'j' && event.key !== 'k')) return;
  const target = event.target as HTMLElement | null;
  if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName))) return;
  const keys = list.keys().filter((key) => key.startsWith('e'));
  const from = currentKey && keys.includes(currentKey) ? keys.indexOf(currentKey) : keys.indexOf(list.firstVisibleKey() ?? '') - (event.key === 'j' ? 1 : 0);
  const next = keys[Math.max(0, Math.min(keys.length - 1, from + (event.key === 'j' ? 1 : -1)))];
  if (!next) return;
  event.preventDefault();
  focusRow(next);
});

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
  const events = await eventsBefore();
  if (!events) return;
  older.state = events.length < PAGE ? 'start' : 'more';
  list.append([older]);
  addEvents(events, 'end');
  list.scrollToBottom();
  const seq = linkedSeq();
  if (seq) void showEvent(seq);
})();
