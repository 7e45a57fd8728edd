import { api, describeError, type Schemas } from '../api.ts';
import { badge, h, notice, replace, time, usd } from '../dom.ts';
import type { Page } from '../main.ts';
import { follow } from '../viewer/live.ts';
import { renderRow } from '../viewer/render.ts';
import { ConversationRows, type GapRow, type PendingRow, type Row, type StoredEvent } from '../viewer/rows.ts';
import { VirtualList } from '../viewer/virtual-list.ts';

type Conversation = Schemas['Conversation'];
const PAGE = 100;

/**
 * One conversation: a header (title, live status, cost, model, times) and its events rendered as a
 * conversation, opening at the newest events; older pages load as the reader scrolls up; new
 * events, deltas and status changes arrive live.
 */
export const conversationPage: Page = (main, route) => {
  const id = route.id!;
  let stopped = false;
  let stopLive: (() => void) | undefined;
  const rows = new ConversationRows();
  const older: GapRow = { key: 'older', type: 'older', state: 'more' };
  let pending: PendingRow | undefined;
  let loadingOlder = false;

  const list: VirtualList<Row> = new VirtualList<Row>((row) => renderRow(row, rows, () => void loadOlder()), () => void loadOlder(), 'Conversation events');
  const header = h('header', { class: 'conversation-head' });
  const connection = h('span', { class: 'connection', role: 'status', 'data-state': 'connecting' }, 'Connecting…');
  const status = h('span', { id: 'live-status' });
  const problems = h('div', { 'aria-live': 'polite' });
  replace(main, header, problems, list.element);

  function showHeader(conversation: Conversation): void {
    const title = conversation.title?.trim() || 'Untitled conversation';
    document.title = `${title} · Agent Platform`;
    replace(status, badge(conversation.execution_status));
    replace(
      header,
      h('p', { class: 'crumbs' }, h('a', { href: '#/conversations' }, '← Conversations')),
      h('div', { class: 'title-line' }, h('h1', { id: 'conversation-title' }, title), status, connection, h('div', { class: 'head-actions' }, renameButton(conversation), exportButton())),
      h(
        'dl',
        { class: 'facts' },
        fact('Cost', usd(conversation.accumulated_cost_usd, 4)),
        fact('Model', conversation.metrics?.model_name ?? '–'),
        fact('Events', conversation.event_count.toLocaleString()),
        fact('Started', time(conversation.created_at)),
        fact('Last event', time(conversation.last_event_at)),
      ),
    );
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
  async function eventsBefore(beforeSeq?: number): Promise<StoredEvent[] | undefined> {
    const { data } = await api.GET('/api/v1/conversations/{conversation_id}/events', {
      params: { path: { conversation_id: id }, query: { order: 'desc', limit: PAGE, ...(beforeSeq ? { before_seq: beforeSeq } : {}) } },
    });
    return data?.items.reverse();
  }

  function addEvents(events: StoredEvent[], where: 'start' | 'end'): void {
    const updated = new Set<string>();
    const orphans = new Set<string>();
    const added = rows.add(events, updated, orphans);
    for (const key of orphans) list.remove(key);
    if (where === 'start') list.prepend(added);
    else {
      if (pending) list.remove('pending');
      list.append(added);
      if (pending) list.append([pending]);
    }
    for (const key of updated) list.refresh(key);
  }

  async function loadOlder(): Promise<void> {
    if (loadingOlder || older.state === 'start' || rows.firstSeq <= 1) return;
    loadingOlder = true;
    older.state = 'loading';
    list.refresh('older');
    const events = await eventsBefore(rows.firstSeq);
    loadingOlder = false;
    if (stopped) return;
    if (!events) {
      older.state = 'error';
      return list.refresh('older');
    }
    if (events.length === 0) {
      older.state = 'start';
      return list.refresh('older');
    }
    list.remove('older');
    addEvents(events, 'start');
    older.state = rows.firstSeq <= 1 ? 'start' : 'more';
    list.prepend([older]);
  }

  void (async () => {
    const conversation = await refreshHeader();
    if (!conversation) return;
    // Open at the newest events: the last page, newest first.
    const events = (await eventsBefore()) ?? [];
    if (stopped) return;
    older.state = events.length === 0 || events[0]!.seq <= 1 ? 'start' : 'more';
    list.append([older]);
    addEvents(events, 'end');
    list.scrollToBottom();
    let headerTimer: number | undefined;
    stopLive = follow(id, () => rows.lastSeq, {
      event(stored) {
        if (stored.seq <= rows.lastSeq && rows.lastSeq > 0) return;
        if (stored.event.kind === 'MessageEvent' && pending && stored.event.source === 'agent') {
          list.remove('pending');
          pending = undefined;
        }
        addEvents([stored], 'end');
        // Cost, counts and title come with the conversation; fetched at most once a second.
        window.clearTimeout(headerTimer);
        headerTimer = window.setTimeout(() => void refreshHeader(), 1000);
      },
      delta(delta) {
        if (!pending) {
          pending = { key: 'pending', type: 'pending', content: '', reasoning: '' };
          list.append([pending]);
        }
        pending.content += delta.content ?? '';
        pending.reasoning += delta.reasoning_content ?? '';
        list.refresh('pending');
      },
      status(update) {
        replace(status, badge(update.execution_status));
      },
      connection(state, detail) {
        connection.dataset.state = state;
        connection.textContent = { connecting: 'Connecting…', live: 'Live', reconnecting: 'Reconnecting…', stopped: detail ?? 'Not live' }[state];
      },
    });
  })();

  return () => {
    stopped = true;
    stopLive?.();
    list.destroy();
    document.title = 'Agent Platform console';
  };
};

function fact(label: string, value: Node | string): HTMLElement {
  return h('div', null, h('dt', null, label), h('dd', null, value));
}
