import { api, describeError, type Schemas } from '../api.ts';
import { badge, h, money, notice, replace, time } from '../dom.ts';
import { can, me } from '../me.ts';
import type { Page } from '../main.ts';
import { duration } from '../viewer/cards/common.ts';
import { PAGE, ViewerFeed } from '../viewer/feed.ts';
import { follow } from '../viewer/live.ts';
import { sharePanel } from '../viewer/share-panel.ts';
import { ConversationRows, type StoredEvent } from '../viewer/rows.ts';

type Conversation = Schemas['Conversation'];

/**
 * One conversation: a header (title, live status, cost, model, times) and its events rendered as a
 * conversation, opening at the newest events; older pages load as the reader scrolls up; new
 * events, deltas and status changes arrive live.
 */
export const conversationPage: Page = (main, route) => {
  const id = route.id!;
  let stopped = false;
  let stopLive: (() => void) | undefined;
  const rows = new ConversationRows(id);
  const feed = new ViewerFeed(rows, eventsBefore, () => updateLiveFacts());
  const header = h('header', { class: 'conversation-head' });
  const connection = h('span', { class: 'connection', role: 'status', 'data-state': 'connecting' }, 'Connecting…');
  const status = h('span', { id: 'live-status' });
  const problems = h('div', { 'aria-live': 'polite' });
  // Facts that change with every event are updated in place, without waiting for the conversation.
  const eventCount = h('dd', { id: 'event-count' }, '–');
  const lastEvent = h('dd', { id: 'last-event' }, '–');
  const runTime = h('dd', { id: 'run-duration' }, '–');
  const started = h('dd', { id: 'started' }, '–');
  let conversation: Conversation | undefined;
  // Made once and kept out of the header, which is rebuilt as the conversation changes: the find bar keeps its state.
  const find = findBar();
  replace(main, header, find, problems, h('div', { class: 'viewer-body' }, feed.outline.element, feed.list.element));

  function showHeader(shown: Conversation): void {
    conversation = shown;
    const title = conversation.title?.trim() || 'Untitled conversation';
    document.title = `${title} · Agent Platform`;
    replace(status, badge(conversation.execution_status));
    replace(
      header,
      h('p', { class: 'crumbs' }, h('a', { href: '#/conversations' }, '← Conversations')),
      h('div', { class: 'title-line' }, h('h1', { id: 'conversation-title' }, title), status, connection, actions(conversation)),
      h(
        'dl',
        { class: 'facts' },
        fact('Cost', money(conversation.accumulated_cost_usd, conversation.accumulated_cost_micro_usd)),
        h('div', null, h('dt', null, 'Duration'), runTime),
        h('div', null, h('dt', null, 'Events'), eventCount),
        fact('Tokens in / out', tokens(conversation)),
        fact('Model', conversation.metrics?.model_name ?? '–'),
        conversation.unrecognized_event_count ? fact('Unrecognized', conversation.unrecognized_event_count.toLocaleString()) : null,
        h('div', null, h('dt', null, 'Started'), started),
        h('div', null, h('dt', null, 'Last event'), lastEvent),
      ),
      conversation.delivery_refusals ? refusalBanner(conversation.delivery_refusals) : null,
    );
    updateLiveFacts();
  }

  /** Event count, last event and duration from the events on screen, when they are ahead of the header. */
  function updateLiveFacts(): void {
    if (!conversation) return;
    eventCount.textContent = Math.max(conversation.event_count, rows.lastSeq === 0 ? 0 : rows.lastSeq).toLocaleString();
    const lastMs = rows.timeOf(rows.lastSeq);
    const lastIso = lastMs === undefined ? conversation.last_event_at : new Date(lastMs).toISOString();
    replace(lastEvent, time(lastIso));
    const startMs = rows.timeOf(1) ?? Date.parse(conversation.created_at);
    // The first event's own time once it is loaded; until then, when the conversation was created.
    replace(started, Number.isFinite(startMs) ? time(new Date(startMs).toISOString()) : '–');
    replace(runTime, lastMs !== undefined && Number.isFinite(startMs) ? h('span', { title: rows.timeOf(1) === undefined ? 'From when the conversation was created' : 'From the first event to the last' }, duration(lastMs - startMs)) : '–');
  }

  /** Export for everyone who reads; Rename and Share only for a role that writes conversations (`WRITE_CONVERSATIONS`). */
  function actions(shown: Conversation): HTMLElement {
    const holder = h('div', { class: 'head-actions' }, exportButton());
    void me().then((user) => can(user, 'WRITE_CONVERSATIONS') && holder.prepend(renameButton(shown), shareButton()));
    return holder;
  }

  /** Rename: the title becomes a field with Save and Cancel. */
  function renameButton(conversation: Conversation): HTMLElement {
    const button = h('button', { type: 'button', class: 'btn small', id: 'rename' }, 'Rename');
    button.addEventListener('click', () => {
      const input = h('input', { id: 'new-title', value: conversation.title ?? '', maxlength: 500, required: true, 'aria-label': 'New title' });
      const message = h('span', { 'aria-live': 'polite' });
      const form = h('form', { class: 'inline-form rename' }, input, h('button', { type: 'submit', class: 'btn small primary' }, 'Save'), h('button', { type: 'button', class: 'btn small', onclick: () => showHeader(conversation) }, 'Cancel'), message);
      form.addEventListener('submit', async (event) => {
        event.preventDefault();
        const result = await api.PATCH('/api/v1/conversations/{conversation_id}', { params: { path: { conversation_id: id } }, body: { title: input.value } });
        if (!result.data) return replace(message, notice(describeError(result.error, result.response.status), 'error'));
        showHeader(result.data);
      });
      header.querySelector('.title-line')!.replaceWith(form);
      input.focus();
    });
    return button;
  }

  /** Share: opens (or closes) the owner's share links under the header. */
  function shareButton(): HTMLElement {
    const button = h('button', { type: 'button', class: 'btn small', id: 'share', 'aria-expanded': 'false', 'aria-controls': 'share-panel' }, 'Share');
    button.addEventListener('click', () => {
      const open = main.querySelector('#share-panel');
      if (open) open.remove();
      else header.after(sharePanel(id));
      button.setAttribute('aria-expanded', String(!open));
    });
    return button;
  }

  /** Download: the whole conversation as NDJSON (the export needs the token, so it is fetched, then saved). */
  function exportButton(): HTMLElement {
    const button = h('button', { type: 'button', class: 'btn small', id: 'export' }, 'Download');
    button.addEventListener('click', async () => {
      button.disabled = true;
      button.textContent = 'Preparing…';
      const { data, response } = await api.GET('/api/v1/conversations/{conversation_id}/export', { params: { path: { conversation_id: id } }, parseAs: 'blob' });
      button.disabled = false;
      button.textContent = 'Download';
      if (!data) return replace(problems, notice(describeError(undefined, response.status), 'error'));
      const url = URL.createObjectURL(data);
      const link = h('a', { href: url, download: `conversation-${id}.ndjson`, hidden: true });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    });
    return button;
  }

  async function refreshHeader(): Promise<Conversation | undefined> {
    const { data, error, response } = await api.GET('/api/v1/conversations/{conversation_id}', { params: { path: { conversation_id: id } } });
    if (stopped) return undefined;
    if (!data) {
      replace(header, h('p', { class: 'crumbs' }, h('a', { href: '#/conversations' }, '← Conversations')), h('h1', null, 'Conversation'));
      replace(problems, notice(response.status === 404 || response.status === 403 ? 'This conversation does not exist, or it is not yours.' : describeError(error, response.status), 'error'));
      return undefined;
    }
    showHeader(data);
    return data;
  }

  /** The page of events before `beforeSeq` (newest first from the server, returned in sequence order). */
  async function eventsBefore(beforeSeq: number | undefined, limit: number): Promise<StoredEvent[] | undefined> {
    const { data } = await api.GET('/api/v1/conversations/{conversation_id}/events', {
      params: { path: { conversation_id: id }, query: { order: 'desc', limit, ...(beforeSeq ? { before_seq: beforeSeq } : {}) } },
    });
    return data?.items.reverse();
  }

  /**
   * Find in this conversation (`q` on its events, the search syntax): Next and Previous (Enter,
   * Shift+Enter) go to the following or preceding matching event from the last one found.
   */
  function findBar(): HTMLElement {
    const input = h('input', { id: 'find-q', type: 'search', maxlength: 500, autocomplete: 'off', placeholder: 'Find in this conversation', 'aria-label': 'Find in this conversation' });
    const previous = h('button', { type: 'button', class: 'btn small', id: 'find-previous' }, 'Previous');
    const next = h('button', { type: 'submit', class: 'btn small', id: 'find-next' }, 'Next');
    const result = h('span', { class: 'hint', id: 'find-status', 'aria-live': 'polite' });
    let at = route.seq ?? 0;
    let counted: string | undefined;
    let total = 0;
    async function go(forward: boolean): Promise<void> {
      const q = input.value.trim();
      if (!q) return;
      const query = forward ? { q, order: 'asc' as const, limit: 1, after_seq: at } : { q, order: 'desc' as const, limit: 1, ...(at > 0 ? { before_seq: at } : {}) };
      const path = { conversation_id: id };
      if (counted !== q) {
        const { data } = await api.GET('/api/v1/conversations/{conversation_id}/events/count', { params: { path, query: { q } } });
        counted = q;
        total = data?.count ?? 0;
      }
      const { data, error, response } = await api.GET('/api/v1/conversations/{conversation_id}/events', { params: { path, query } });
      if (stopped) return;
      if (!data) return void (result.textContent = describeError(error, response.status));
      const matches = `${total.toLocaleString()} match${total === 1 ? '' : 'es'}`;
      const found = data.items[0];
      if (!found) return void (result.textContent = total === 0 ? 'No match' : `${matches} · no ${forward ? 'later' : 'earlier'} one`);
      at = found.seq;
      result.textContent = `#${found.seq} · ${matches}`;
      await showEvent(found.seq);
    }
    const form = h('form', { class: 'find-bar', role: 'search', id: 'find', 'aria-label': 'Find in this conversation' }, input, previous, next, result);
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      void go(true);
    });
    input.addEventListener('keydown', (event) => {
      if (event.key === 'Enter' && event.shiftKey) {
        event.preventDefault();
        void go(false);
      }
    });
    input.addEventListener('input', () => (counted = undefined));
    previous.addEventListener('click', () => void go(false));
    return form;
  }

  /** Scrolls to event `seq` (loading older pages up to it first), marks it and gives it the focus. */
  async function showEvent(seq: number): Promise<void> {
    if (seq > rows.lastSeq) return replace(problems, notice(`Event #${seq} is not in this conversation (yet).`, 'error'));
    await feed.showEvent(seq);
  }

  const onShowEvent = (event: Event) => void showEvent((event as CustomEvent<number>).detail);
  window.addEventListener('console:show-event', onShowEvent);

  void (async () => {
    const conversation = await refreshHeader();
    if (!conversation) return;
    // Open at the newest events: the last page, newest first.
    const events = (await eventsBefore(undefined, PAGE)) ?? [];
    if (stopped) return;
    feed.open(events);
    if (route.seq) void showEvent(route.seq);
    let headerTimer: number | undefined;
    stopLive = follow(id, () => rows.lastSeq, {
      event(stored) {
        if (!feed.addLive(stored)) return;
        // Cost, counts and title come with the conversation; fetched at most once a second.
        window.clearTimeout(headerTimer);
        headerTimer = window.setTimeout(() => void refreshHeader(), 1000);
      },
      delta(delta) {
        feed.addDelta(delta);
      },
      status(update) {
        replace(status, badge(update.execution_status));
      },
      connection(state, detail) {
        connection.dataset.state = state;
        connection.textContent = { connecting: 'Connecting…', live: 'Receiving new events', reconnecting: 'Reconnecting…', stopped: detail ?? 'Not receiving new events' }[state];
      },
    });
  })();

  return () => {
    stopped = true;
    window.removeEventListener('console:show-event', onShowEvent);
    stopLive?.();
    feed.destroy();
    document.title = 'Agent Platform console';
  };
};

function tokens(conversation: Conversation): string {
  const usage = conversation.metrics?.accumulated_token_usage;
  if (!usage || (usage.prompt_tokens === undefined && usage.completion_tokens === undefined)) return '–';
  return `${(usage.prompt_tokens ?? 0).toLocaleString()} / ${(usage.completion_tokens ?? 0).toLocaleString()}`;
}

function fact(label: string, value: Node | string): HTMLElement {
  return h('div', null, h('dt', null, label), h('dd', null, value));
}

/** Says that batches of this conversation were refused and are unresolved: their events are missing until resent or replayed. */
function refusalBanner(refusals: NonNullable<Conversation['delivery_refusals']>): HTMLElement {
  const batches = `${refusals.count} batch${refusals.count === 1 ? '' : 'es'}`;
  return h(
    'div',
    { class: 'notice error refusal-banner', role: 'status', id: 'delivery-refusals' },
    h('p', null, h('strong', null, `The server refused ${batches} of this conversation’s events`), ' (last ', String(refusals.last_status), ', ', time(refusals.last_at), '). Events in them are missing here until the agent-server’s retry is accepted or an administrator replays them.'),
    // The detail may quote what the agent sent: text, never markup.
    h('details', { class: 'refusal-detail' }, h('summary', null, 'Why'), h('code', null, refusals.last_detail)),
  );
}
