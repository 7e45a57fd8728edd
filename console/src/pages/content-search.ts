import { api, describeError, type Schemas } from '../api.ts';
import { h, notice, relative, replace } from '../dom.ts';

type Hit = Schemas['SearchHit'];

/**
 * Search inside the caller's conversations (`searchEvents`): hits grouped by conversation, newest
 * first, each snippet with its matches marked, each opening the viewer at its event.
 */
export function contentSearch(onActive: (active: boolean) => void, initial: string): { form: HTMLElement; results: HTMLElement; run(): void; stop(): void } {
  const q = h('input', {
    id: 'content-q', name: 'content', type: 'search', maxlength: 500, autocomplete: 'off', value: initial,
    placeholder: 'An error, a file, a command… ("a phrase", -word, pars*)',
  });
  const form = h(
    'form',
    { class: 'filters card', role: 'search', id: 'content-search', 'aria-label': 'Inside conversations' },
    h('div', { class: 'grow' }, h('label', { for: 'content-q' }, 'Search inside conversations'), q),
    h('button', { type: 'submit', class: 'btn primary' }, 'Search inside'),
  );
  const summary = h('p', { class: 'hint', id: 'content-count', 'aria-live': 'polite' });
  const groups = h('div', { class: 'hit-groups', id: 'content-results' });
  const status = h('div', { 'aria-live': 'polite' });
  const more = h('button', { type: 'button', class: 'btn', hidden: true }, 'More results');
  const results = h('section', { class: 'content-results', hidden: true, 'aria-label': 'Search results' }, summary, groups, status, h('div', { class: 'pager' }, more));
  const lists = new Map<string, HTMLElement>();
  let cursor: string | undefined;
  let generation = 0;
  let stopped = false;

  async function load(reset: boolean): Promise<void> {
    const text = q.value.trim();
    const mine = reset ? ++generation : generation;
    if (reset) {
      cursor = undefined;
      lists.clear();
      groups.replaceChildren();
      summary.textContent = '';
      results.hidden = text === '';
      onActive(text !== '');
      if (text === '') return;
      void api.GET('/api/v1/search/events/count', { params: { query: { q: text } } }).then(({ data }) => {
        if (data && mine === generation) summary.textContent = `${data.count.toLocaleString()} matching event${data.count === 1 ? '' : 's'}${freshness(data.indexed_through)}`;
      });
    }
    more.disabled = true;
    replace(status, h('p', { class: 'hint' }, 'Searching…'));
    const { data, error, response } = await api.GET('/api/v1/search/events', { params: { query: { q: text, limit: 25, cursor } } });
    if (stopped || mine !== generation) return;
    more.disabled = false;
    if (!data) return replace(status, notice(describeError(error, response.status), 'error'));
    replace(status, groups.children.length + data.items.length === 0 ? h('p', { class: 'empty' }, 'No event matches this search.') : null);
    for (const hit of data.items) listOf(hit).append(hitItem(hit));
    cursor = data.next_cursor ?? undefined;
    more.hidden = !cursor;
  }

  /** The list of the hit's conversation, made (with its heading) at its first hit. */
  function listOf(hit: Hit): HTMLElement {
    let list = lists.get(hit.conversation_id);
    if (!list) {
      list = h('ol', { class: 'hits' });
      lists.set(hit.conversation_id, list);
      const title = hit.conversation_title?.trim() || `Untitled · ${hit.conversation_id.slice(0, 8)}`;
      groups.append(h('article', { class: 'card hit-group' }, h('h2', null, h('a', { href: `#/conversations/${hit.conversation_id}` }, title)), list));
    }
    return list;
  }

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void load(true);
  });
  more.addEventListener('click', () => void load(false));
  return {
    form,
    results,
    run: () => void load(true),
    stop: () => (stopped = true),
  };
}

/** A hit: kind, time and its snippet, linking to the viewer at the event. */
function hitItem(hit: Hit): HTMLElement {
  return h(
    'li',
    null,
    h(
      'a',
      { class: 'hit', href: `#/conversations/${hit.conversation_id}/events/${hit.seq}` },
      h('span', { class: 'hit-meta' }, h('span', { class: 'hit-kind' }, hit.kind.replace(/Event$/, '')), ' · #', String(hit.seq), ' · ', relative(hit.timestamp)),
      h('span', { class: 'snippet' }, ...highlighted(hit.snippet)),
    ),
  );
}

/** The snippet as text nodes with `<mark>` elements at the highlights (code point offsets): never HTML. */
export function highlighted(snippet: Schemas['SearchSnippet']): Node[] {
  const points = Array.from(snippet.text);
  const nodes: Node[] = [];
  let at = 0;
  for (const [start = 0, end = 0] of snippet.highlights) {
    if (start < at || end <= start || end > points.length) continue;
    if (start > at) nodes.push(document.createTextNode(points.slice(at, start).join('')));
    nodes.push(h('mark', null, points.slice(start, end).join('')));
    at = end;
  }
  if (at < points.length) nodes.push(document.createTextNode(points.slice(at).join('')));
  return nodes;
}

/** Says how far behind the index is, when it is (more than a few seconds). */
function freshness(indexedThrough: string): string {
  const behind = Date.now() - Date.parse(indexedThrough);
  return behind > 5_000 ? ` · events of the last ${Math.ceil(behind / 1000)} s are still being indexed` : '';
}
