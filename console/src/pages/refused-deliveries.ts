import { api, describeError, type Schemas } from '../api.ts';
import { h, notice, replace, time } from '../dom.ts';

type RefusedDelivery = Schemas['RefusedDelivery'];

/** The refusal ledger for administrators: every user's refused webhook batches, newest first, with replay. */
export async function showRefusedDeliveries(section: HTMLElement): Promise<void> {
  const title = h('h2', { id: 'refused-title' }, 'Refused deliveries');
  const body = h('tbody');
  const status = h('div', { 'aria-live': 'polite' });
  const more = h('button', { type: 'button', class: 'btn small', hidden: true }, 'Older refusals');
  let cursor: string | undefined;
  async function load(reset: boolean): Promise<void> {
    if (reset) {
      cursor = undefined;
      body.replaceChildren();
    }
    const { data, error, response } = await api.GET('/api/admin/refused-deliveries', { params: { query: { limit: 50, ...(cursor ? { cursor } : {}) } } });
    if (!data) return replace(status, notice(describeError(error, response.status), 'error'));
    replace(status, body.children.length + data.items.length === 0 ? h('p', { class: 'empty' }, 'No refused deliveries.') : null);
    body.append(...data.items.map((item) => refusalRow(item, status)));
    cursor = data.next_cursor ?? undefined;
    more.hidden = !cursor;
  }
  more.addEventListener('click', () => void load(false));
  replace(
    section,
    title,
    h('p', { class: 'hint' }, 'Webhook batches answered 413 or 422, kept with their body. Replay stores one under today’s rules; one whose events all arrived since (the agent-server’s retry accepted) is resolved.'),
    h(
      'div',
      { class: 'table-wrap' },
      h(
        'table',
        { class: 'list compact', id: 'refused-deliveries' },
        h('caption', { class: 'visually-hidden' }, 'Refused deliveries'),
        h(
          'thead',
          null,
          h(
            'tr',
            null,
            ...['Last seen', 'Conversation', 'Status', 'Why', 'Events', 'Size', 'Attempts'].map((label) => h('th', { scope: 'col' }, label)),
            h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Actions')),
          ),
        ),
        body,
      ),
    ),
    status,
    h('div', { class: 'pager' }, more),
  );
  await load(true);
}

function refusalRow(item: RefusedDelivery, message: HTMLElement): HTMLElement {
  // Resolved by the agent-server's own retry: nothing is missing, a replay would store nothing.
  const done = item.replayed_at ? h('span', { class: 'hint' }, 'Replayed ', time(item.replayed_at)) : item.resolved_at ? h('span', { class: 'hint resolved' }, 'Resolved ', time(item.resolved_at)) : null;
  const action = h('td', { class: 'actions' }, done ?? replayButton(item, message));
  return h(
    'tr',
    { 'data-id': String(item.id) },
    h('td', null, time(item.last_seen_at)),
    h('td', null, h('code', { class: 'conversation-id' }, item.conversation_id)),
    h('td', null, h('span', { class: 'unit' }, 'Status '), String(item.status)),
    // Agent-sent values may appear in the detail: it is text, never markup.
    h('td', { class: 'refusal-detail' }, h('details', null, h('summary', null, h('code', null, item.reason)), item.detail)),
    h('td', null, item.event_count === null ? '–' : String(item.event_count), h('span', { class: 'unit' }, ' events')),
    h('td', null, item.body_bytes === null ? '–' : bytes(item.body_bytes)),
    h('td', null, item.attempts.toLocaleString(), h('span', { class: 'unit' }, ' attempts')),
    action,
  );
}

function replayButton(item: RefusedDelivery, message: HTMLElement): HTMLButtonElement {
  const button = h('button', { type: 'button', class: 'btn small replay' }, 'Replay', h('span', { class: 'visually-hidden' }, ` refusal ${item.id}`));
  button.addEventListener('click', () => {
    // A second click confirms: no browser dialog, and keyboard users get the same two steps.
    if (button.dataset.confirm !== 'yes') {
      button.dataset.confirm = 'yes';
      button.replaceChildren('Confirm replay', h('span', { class: 'visually-hidden' }, ` of refusal ${item.id}`));
      return;
    }
    button.disabled = true;
    void api.POST('/api/admin/refused-deliveries/{refused_delivery_id}/replay', { params: { path: { refused_delivery_id: item.id } } }).then(({ data, error, response }) => {
      if (!data) {
        button.disabled = false;
        return replace(message, notice(`Refusal ${item.id} was refused again: ${describeError(error, response.status)}`, 'error'));
      }
      replace(message, notice(`Refusal ${item.id} replayed: ${data.stored_events} event${data.stored_events === 1 ? '' : 's'} stored.`));
      button.closest('tr')!.replaceWith(refusalRow(data.delivery, message));
    });
  });
  return button;
}

function bytes(count: number): string {
  if (count < 1024) return `${count} B`;
  if (count < 1024 * 1024) return `${(count / 1024).toFixed(1)} KiB`;
  return `${(count / 1024 / 1024).toFixed(1)} MiB`;
}
