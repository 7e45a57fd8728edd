import { api, describeError, type Schemas } from '../api.ts';
import { badge, copyButton, h, notice, replace, time } from '../dom.ts';

type Endpoint = Schemas['WebhookEndpoint'];

/** My outbound webhook endpoints: list (each links to its page: health, messages, recovery), add (the signing secret shown once), send a test, delete. */
export async function showWebhookEndpoints(section: HTMLElement, created?: Schemas['WebhookEndpointWithSecret']): Promise<void> {
  const title = h('h2', { id: 'endpoints-title' }, 'Webhook endpoints');
  const { data, error, response } = await api.GET('/api/v1/webhook-endpoints');
  if (!data) return replace(section, title, notice(describeError(error, response.status), 'error'));
  const message = h('div', { 'aria-live': 'polite' });
  const url = h('input', { id: 'endpoint-url', type: 'url', required: true, maxlength: 2048, placeholder: 'https://example.com/hooks/agents', autocomplete: 'off' });
  const description = h('input', { id: 'endpoint-description', maxlength: 500, autocomplete: 'off' });
  const form = h(
    'form',
    { class: 'form-grid', id: 'create-endpoint' },
    h('div', null, h('label', { for: 'endpoint-url' }, 'URL'), url),
    h('div', null, h('label', { for: 'endpoint-description' }, 'Description'), description),
    h('button', { type: 'submit', class: 'btn primary' }, 'Add endpoint'),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const result = await api.POST('/api/v1/webhook-endpoints', { body: { url: url.value, ...(description.value ? { description: description.value } : {}) } });
    if (!result.data) return replace(message, notice(describeError(result.error, result.response.status), 'error'));
    void showWebhookEndpoints(section, result.data);
  });
  const act = async (call: Promise<{ response: Response; error?: unknown }>, done: string) => {
    const { response: answer, error: problem } = await call;
    if (!answer.ok) return replace(message, notice(describeError(problem, answer.status), 'error'));
    await showWebhookEndpoints(section);
    replace(section.querySelector('[aria-live]')!, notice(done));
  };
  const row = (endpoint: Endpoint) => {
    const path = { params: { path: { endpoint_id: endpoint.id } } };
    return h(
      'tr',
      null,
      h('td', null, h('a', { href: `#/webhook-endpoints/${encodeURIComponent(endpoint.id)}` }, h('code', null, endpoint.url)), endpoint.description ? [h('br'), h('span', { class: 'hint' }, endpoint.description)] : null),
      h('td', null, badge(endpoint.disabled ? 'disabled' : 'enabled'), endpoint.disabled_reason ? h('span', { class: 'hint' }, ` ${endpoint.disabled_reason}`) : null),
      h('td', null, time(endpoint.created_at)),
      h(
        'td',
        { class: 'actions' },
        h('button', { type: 'button', class: 'btn small', onclick: () => void act(api.POST('/api/v1/webhook-endpoints/{endpoint_id}/test', path), 'Test message queued.') }, 'Send test', h('span', { class: 'visually-hidden' }, ` to ${endpoint.url}`)),
        h('button', { type: 'button', class: 'btn small danger', onclick: () => void act(api.DELETE('/api/v1/webhook-endpoints/{endpoint_id}', path), 'Endpoint deleted.') }, 'Delete', h('span', { class: 'visually-hidden' }, ` ${endpoint.url}`)),
      ),
    );
  };
  replace(
    section,
    title,
    h('p', { class: 'hint' }, 'Signed messages about your conversations and payments, sent to your own URLs (see docs/outbound-webhooks.md).'),
    created
      ? h(
          'div',
          { class: 'notice info secret-box', role: 'status' },
          h('p', null, h('strong', null, 'Endpoint added.'), ' Copy its signing secret now: it is shown only this once.'),
          h('div', { class: 'secret' }, h('code', { id: 'endpoint-secret' }, created.secret), copyButton(created.secret)),
        )
      : null,
    data.items.length
      ? h(
          'div',
          { class: 'table-wrap' },
          h(
            'table',
            { class: 'list compact stacked', id: 'endpoints' },
            h('caption', { class: 'visually-hidden' }, 'Webhook endpoints'),
            h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'URL'), h('th', { scope: 'col' }, 'State'), h('th', { scope: 'col' }, 'Added'), h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Actions')))),
            h('tbody', null, data.items.map(row)),
          ),
        )
      : h('p', { class: 'empty' }, 'No endpoints.'),
    form,
    message,
  );
}
