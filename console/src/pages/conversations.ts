import { api, describeError, type Schemas } from '../api.ts';
import { badge, h, notice, relative, replace, usd } from '../dom.ts';
import type { Page } from '../main.ts';

type Conversation = Schemas['Conversation'];

/** The caller's conversations, newest first, a page at a time. */
export const conversationsPage: Page = (main) => {
  const rows = h('tbody');
  const status = h('div', { 'aria-live': 'polite' });
  const more = h('button', { type: 'button', class: 'btn', hidden: true }, 'Load more');
  let cursor: string | undefined;
  let stopped = false;

  async function load(reset: boolean): Promise<void> {
    if (reset) {
      cursor = undefined;
      rows.replaceChildren();
    }
    more.disabled = true;
    replace(status, h('p', { class: 'hint' }, 'Loading…'));
    const { data, error, response } = await api.GET('/api/v1/conversations', { params: { query: { limit: 25, cursor } } });
    if (stopped) return;
    more.disabled = false;
    if (!data) return replace(status, notice(describeError(error, response.status), 'error'));
    replace(status, rows.children.length + data.items.length === 0 ? h('p', { class: 'empty' }, 'No conversations yet. They appear here when an agent runtime sends their first events.') : null);
    for (const conversation of data.items) rows.append(row(conversation));
    cursor = data.next_cursor ?? undefined;
    more.hidden = !cursor;
  }
  more.addEventListener('click', () => void load(false));

  replace(
    main,
    h('div', { class: 'page-head' }, h('h1', null, 'Conversations')),
    h(
      'div',
      { class: 'card flush' },
      h(
        'table',
        { class: 'list', id: 'conversations' },
        h('caption', { class: 'visually-hidden' }, 'Your conversations'),
        h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Title'), h('th', { scope: 'col' }, 'Status'), h('th', { scope: 'col', class: 'num' }, 'Events'), h('th', { scope: 'col', class: 'num' }, 'Cost'), h('th', { scope: 'col' }, 'Updated'))),
        rows,
      ),
    ),
    status,
    h('div', { class: 'pager' }, more),
  );
  void load(true);
  return () => (stopped = true);
};

function row(conversation: Conversation): HTMLElement {
  const title = conversation.title?.trim() || `Untitled · ${conversation.id.slice(0, 8)}`;
  return h(
    'tr',
    null,
    h('td', { class: 'title' }, h('a', { href: `#/conversations/${conversation.id}` }, title)),
    h('td', null, badge(conversation.execution_status)),
    h('td', { class: 'num' }, conversation.event_count.toLocaleString(), h('span', { class: 'unit' }, conversation.event_count === 1 ? ' event' : ' events')),
    h('td', { class: 'num' }, usd(conversation.metrics?.accumulated_cost)),
    h('td', null, relative(conversation.last_event_at ?? conversation.updated_at)),
  );
}
