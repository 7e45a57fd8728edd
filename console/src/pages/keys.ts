import { api, describeError, type Schemas } from '../api.ts';
import { copyButton, h, notice, replace, time } from '../dom.ts';

type Key = Schemas['Key'];

/** My keys: list, create (the secret shown once, with a copy button), revoke. */
export async function showKeys(section: HTMLElement, created?: Schemas['CreatedKey']): Promise<void> {
  const title = h('h2', { id: 'keys-title' }, 'Keys');
  const { data, error, response } = await api.GET('/api/keys');
  if (!data) return replace(section, title, notice(describeError(error, response.status), 'error'));
  const name = h('input', { id: 'key-name', name: 'name', required: true, maxlength: 100, autocomplete: 'off', placeholder: 'e.g. laptop CLI' });
  const kind = h(
    'select',
    { id: 'key-kind', name: 'kind' },
    h('option', { value: 'access_token' }, 'Access token (people, tools)'),
    h('option', { value: 'session_api_key' }, 'Session API key (agent runtimes)'),
  );
  const expires = h('input', { id: 'key-expires', name: 'expires_in_days', type: 'number', min: 1, max: 3650, step: 1, inputmode: 'numeric', placeholder: 'never' });
  const message = h('div', { 'aria-live': 'polite' });
  const form = h(
    'form',
    { class: 'form-grid', id: 'create-key' },
    h('div', null, h('label', { for: 'key-name' }, 'Name'), name),
    h('div', null, h('label', { for: 'key-kind' }, 'Kind'), kind),
    h('div', null, h('label', { for: 'key-expires' }, 'Expires in days'), expires),
    h('button', { type: 'submit', class: 'btn primary' }, 'Create key'),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const days = expires.value ? Number(expires.value) : undefined;
    const result = await api.POST('/api/keys', {
      body: { name: name.value, kind: kind.value as Schemas['KeyKind'], ...(days ? { expires_in_days: days } : {}) },
    });
    if (!result.data) return replace(message, notice(describeError(result.error, result.response.status), 'error'));
    void showKeys(section, result.data);
  });
  replace(
    section,
    title,
    created ? secretBox(created) : null,
    data.keys.length ? keyTable(data.keys, section, message) : h('p', { class: 'empty' }, 'No keys.'),
    h('h3', null, 'New key'),
    form,
    message,
  );
  if (created) section.querySelector<HTMLElement>('#new-secret')?.focus();
}

/** The new key's secret: shown this once, never again. */
function secretBox(key: Schemas['CreatedKey']): HTMLElement {
  return h(
    'div',
    { class: 'notice info secret-box', role: 'status' },
    h('p', null, h('strong', null, `Key “${key.name ?? key.id}” created.`), ' Copy its secret now: it is shown only this once.'),
    h('div', { class: 'secret' }, h('code', { id: 'new-secret', tabindex: -1 }, key.secret), copyButton(key.secret)),
  );
}

function keyTable(keys: Key[], section: HTMLElement, message: HTMLElement): HTMLElement {
  const revoke = (key: Key, button: HTMLButtonElement) => {
    // A second click confirms: no browser dialog, and keyboard users get the same two steps.
    if (button.dataset.confirm !== 'yes') {
      button.dataset.confirm = 'yes';
      button.replaceChildren('Confirm revoke', h('span', { class: 'visually-hidden' }, ` ${key.name ?? 'key'}`));
      return;
    }
    void api.DELETE('/api/keys/{key_id}', { params: { path: { key_id: key.id } } }).then(({ response, error }) => {
      if (!response.ok) return replace(message, notice(describeError(error, response.status), 'error'));
      void showKeys(section);
    });
  };
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { class: 'list compact stacked', id: 'keys' },
      h('caption', { class: 'visually-hidden' }, 'Your keys'),
      h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Name'), h('th', { scope: 'col' }, 'Kind'), h('th', { scope: 'col' }, 'Last used'), h('th', { scope: 'col' }, 'Expires'), h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Actions')))),
      h(
        'tbody',
        null,
        keys.map((key) => {
          const button = h('button', { type: 'button', class: 'btn small danger' }, 'Revoke', h('span', { class: 'visually-hidden' }, ` ${key.name ?? 'key'}`));
          button.addEventListener('click', () => revoke(key, button));
          return h(
            'tr',
            null,
            h('td', { 'data-label': 'Name' }, key.name ?? '–', key.prefix ? h('span', { class: 'hint' }, ` ${key.prefix}…`) : null),
            h('td', { 'data-label': 'Kind' }, key.kind === 'access_token' ? 'Access token' : 'Session API key'),
            h('td', { 'data-label': 'Last used' }, time(key.last_used_at)),
            h('td', { 'data-label': 'Expires' }, key.expires_at ? time(key.expires_at) : 'Never'),
            h('td', { class: 'actions' }, button),
          );
        }),
      ),
    ),
  );
}
