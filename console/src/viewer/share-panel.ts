import { api, describeError, type Schemas } from '../api.ts';
import { confirmedAction } from '../confirm.ts';
import { copyButton, h, notice, replace, time } from '../dom.ts';

type ShareLink = Schemas['ShareLink'];

const LIFETIMES: [string, number | null][] = [
  ['Never (until revoked)', null],
  ['In 1 day', 1],
  ['In 7 days', 7],
  ['In 30 days', 30],
  ['In 365 days', 365],
];

function stateOf(link: ShareLink): 'active' | 'revoked' | 'expired' {
  if (link.revoked_at) return 'revoked';
  if (link.expires_at && Date.parse(link.expires_at) <= Date.now()) return 'expired';
  return 'active';
}

/**
 * The owner's share links of one conversation: create one (its address shown once, with Copy), list
 * them, revoke. A link shows the conversation read-only to anyone holding it (docs/sharing.md).
 */
export function sharePanel(conversationId: string): HTMLElement {
  const path = { conversation_id: conversationId };
  const created = h('div', { 'aria-live': 'polite' });
  const links = h('div');
  const lifetime = h('select', { id: 'share-expires' }, ...LIFETIMES.map(([label], i) => h('option', { value: i }, label)));
  const shareTags = h('input', { type: 'checkbox', id: 'share-tags' });
  const form = h(
    'form',
    { class: 'inline-form share-form' },
    h('label', { for: 'share-expires' }, 'Link expires'),
    lifetime,
    h('label', { class: 'check' }, shareTags, ' Show tags'),
    h('button', { type: 'submit', class: 'btn small primary', id: 'create-share-link' }, 'Create link'),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const days = LIFETIMES[Number(lifetime.value)]![1];
    const body = { share_tags: shareTags.checked, ...(days ? { expires_at: new Date(Date.now() + days * 86_400_000).toISOString() } : {}) };
    const result = await api.POST('/api/v1/conversations/{conversation_id}/share-links', { params: { path }, body });
    if (!result.data) return replace(created, notice(describeError(result.error, result.response.status), 'error'));
    const url = result.data.url ?? '';
    replace(
      created,
      h('p', { class: 'hint' }, 'Anyone with this address can read the conversation, without signing in. It is shown only now:'),
      h('div', { class: 'secret' }, h('code', { id: 'share-url', tabindex: -1 }, url), copyButton(url, 'Copy link')),
    );
    void refresh();
  });

  async function refresh(): Promise<void> {
    const { data, error, response } = await api.GET('/api/v1/conversations/{conversation_id}/share-links', { params: { path } });
    if (!data) return replace(links, notice(describeError(error, response.status), 'error'));
    if (data.items.length === 0) return replace(links, h('p', { class: 'hint' }, 'No links yet.'));
    replace(
      links,
      h('div', { class: 'table-wrap' }, h(
        'table',
        { class: 'list share-links' },
        h('caption', { class: 'visually-hidden' }, 'Share links of this conversation'),
        h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Link'), h('th', { scope: 'col' }, 'Created'), h('th', { scope: 'col' }, 'Expires'), h('th', { scope: 'col' }, 'State'), h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Actions')))),
        h(
          'tbody',
          null,
          ...data.items.map((link) => {
            const state = stateOf(link);
            return h(
              'tr',
              { 'data-link': link.id },
              h('td', null, h('code', null, `${link.token_hint}…`), link.share_tags ? ' (tags shown)' : ''),
              h('td', { 'data-label': 'Created' }, time(link.created_at)),
              h('td', { 'data-label': 'Expires' }, link.expires_at ? time(link.expires_at) : 'never'),
              h('td', null, h('span', { class: 'badge', 'data-status': state }, state)),
              h(
                'td',
                null,
                state === 'active'
                  ? confirmedAction({
                      label: 'Revoke',
                      confirm: 'Confirm revoke',
                      target: `link ${link.token_hint}`,
                      act: async () => {
                        const result = await api.DELETE('/api/v1/conversations/{conversation_id}/share-links/{share_link_id}', { params: { path: { ...path, share_link_id: link.id } } });
                        if (!result.data) return describeError(result.error, result.response.status);
                        void refresh();
                        return undefined;
                      },
                    })
                  : null,
              ),
            );
          }),
        ),
      )),
    );
  }

  void refresh();
  return h('section', { class: 'share-panel card', id: 'share-panel', 'aria-labelledby': 'share-heading' }, h('h2', { id: 'share-heading' }, 'Share a read-only link'), form, created, links);
}
