import { api, describeError, type Schemas } from '../api.ts';
import { badge, h, money, notice, relative, replace } from '../dom.ts';

/** Appends `child` to `parent` and returns the parent. */
const append = <T extends HTMLElement>(parent: T, child: Node): T => (parent.append(child), parent);
import type { Page } from '../main.ts';
import { replaceQuery } from '../router.ts';
import { contentSearch } from './content-search.ts';

type Conversation = Schemas['Conversation'];
type Status = Schemas['ExecutionStatus'];
type Sort = 'created_desc' | 'created_asc' | 'updated_desc';

const STATUSES: Status[] = ['running', 'idle', 'paused', 'waiting_for_confirmation', 'finished', 'error', 'stuck'];

/**
 * The caller's conversations with search (title, status, creation date, order), a page at a time.
 * The filters live in the URL (`#/conversations?q=…`), so reloading or going back keeps them.
 */
export const conversationsPage: Page = (main, route) => {
  const rows = h('tbody');
  const status = h('div', { 'aria-live': 'polite' });
  const total = h('p', { class: 'hint', id: 'conversation-count', 'aria-live': 'polite' });
  const more = h('button', { type: 'button', class: 'btn', hidden: true }, 'Load more');
  const q = h('input', { id: 'search-q', name: 'q', type: 'search', maxlength: 500, autocomplete: 'off', placeholder: 'Words in the title', value: route.query.get('q') ?? '' });
  const state = h('select', { id: 'search-status', name: 'status' }, h('option', { value: '' }, 'Any status'), ...STATUSES.map((value) => h('option', { value, selected: route.query.get('status') === value }, value.replaceAll('_', ' '))));
  const since = h('input', { id: 'search-since', name: 'created_since', type: 'date', value: route.query.get('created_since') ?? '' });
  const sort = h(
    'select',
    { id: 'search-sort', name: 'sort' },
    h('option', { value: 'created_desc', selected: route.query.get('sort') === 'created_desc' }, 'Newest first'),
    h('option', { value: 'updated_desc', selected: route.query.get('sort') === 'updated_desc' }, 'Recently active'),
    h('option', { value: 'created_asc', selected: route.query.get('sort') === 'created_asc' }, 'Oldest first'),
  );
  const form = h(
    'form',
    { class: 'filters card', role: 'search', id: 'conversation-search', 'aria-label': 'Conversations by title and status' },
    h('div', { class: 'grow' }, h('label', { for: 'search-q' }, 'Search'), q),
    h('div', null, h('label', { for: 'search-status' }, 'Status'), state),
    h('div', null, h('label', { for: 'search-since' }, 'Created since'), since),
    h('div', null, h('label', { for: 'search-sort' }, 'Order'), sort),
    h('button', { type: 'submit', class: 'btn primary' }, 'Search'),
  );
  const listCard = h('div', { class: 'card flush' });
  const pager = h('div', { class: 'pager' }, more);
  // Searching inside conversations shows hits in place of the list; an empty box brings the list back.
  const inside = contentSearch((active) => {
    for (const part of [form, listCard, status, pager]) part.hidden = active;
    const query = new URLSearchParams(location.hash.split('?')[1] ?? '');
    const text = (document.getElementById('content-q') as HTMLInputElement | null)?.value.trim() ?? '';
    if (active) query.set('content', text);
    else query.delete('content');
    replaceQuery(query);
  }, route.query.get('content') ?? '');
  let cursor: string | undefined;
  let stopped = false;
  let generation = 0;

  function filters() {
    return {
      ...(q.value.trim() ? { q: q.value.trim() } : {}),
      ...(state.value ? { status: [state.value as Status] } : {}),
      ...(since.value ? { created_since: since.value } : {}),
    };
  }

  async function load(reset: boolean): Promise<void> {
    const mine = reset ? ++generation : generation;
    if (reset) {
      cursor = undefined;
      rows.replaceChildren();
      const query = new URLSearchParams();
      for (const [name, value] of Object.entries({ q: q.value.trim(), status: state.value, created_since: since.value, sort: sort.value === 'created_desc' ? '' : sort.value })) if (value) query.set(name, value);
      const content = route.query.get('content');
      if (content && !form.hidden) query.delete('content');
      replaceQuery(query);
      void api.GET('/api/v1/conversations/count', { params: { query: filters() } }).then(({ data }) => {
        if (data && mine === generation) total.textContent = `${data.count.toLocaleString()} conversation${data.count === 1 ? '' : 's'}`;
      });
    }
    more.disabled = true;
    replace(status, h('p', { class: 'hint' }, 'Loading…'));
    const { data, error, response } = await api.GET('/api/v1/conversations', { params: { query: { ...filters(), sort: sort.value as Sort, limit: 25, cursor } } });
    if (stopped || mine !== generation) return;
    more.disabled = false;
    if (!data) return replace(status, notice(describeError(error, response.status), 'error'));
    const filtered = Object.keys(filters()).length > 0;
    replace(status, rows.children.length + data.items.length === 0 ? h('p', { class: 'empty' }, filtered ? 'No conversation matches this search.' : 'No conversations yet. They appear here when an agent runtime sends their first events.') : null);
    for (const conversation of data.items) rows.append(row(conversation));
    cursor = data.next_cursor ?? undefined;
    more.hidden = !cursor;
  }
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void load(true);
  });
  for (const control of [state, since, sort]) control.addEventListener('change', () => void load(true));
  more.addEventListener('click', () => void load(false));

  replace(
    main,
    h('div', { class: 'page-head' }, h('h1', null, 'Conversations'), total),
    inside.form,
    inside.results,
    form,
    append(
      listCard,
      h(
        'table',
        { class: 'list', id: 'conversations' },
        h('caption', { class: 'visually-hidden' }, 'Your conversations'),
        h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Title'), h('th', { scope: 'col' }, 'Status'), h('th', { scope: 'col', class: 'num' }, 'Events'), h('th', { scope: 'col', class: 'num' }, 'Cost'), h('th', { scope: 'col' }, 'Updated'))),
        rows,
      ),
    ),
    status,
    pager,
  );
  void load(true);
  if (route.query.get('content')) inside.run();
  return () => {
    stopped = true;
    inside.stop();
  };
};

function row(conversation: Conversation): HTMLElement {
  const title = conversation.title?.trim() || `Untitled · ${conversation.id.slice(0, 8)}`;
  return h(
    'tr',
    null,
    h('td', { class: 'title' }, h('a', { href: `#/conversations/${conversation.id}` }, title)),
    h('td', null, badge(conversation.execution_status)),
    h('td', { class: 'num' }, conversation.event_count.toLocaleString(), h('span', { class: 'unit' }, conversation.event_count === 1 ? ' event' : ' events')),
    h('td', { class: 'num' }, money(conversation.accumulated_cost_usd, conversation.accumulated_cost_micro_usd)),
    h('td', null, relative(conversation.last_event_at ?? conversation.updated_at)),
  );
}
