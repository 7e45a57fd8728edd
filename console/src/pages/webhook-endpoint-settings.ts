import { api, describeError, type Schemas } from '../api.ts';
import { h, notice, replace } from '../dom.ts';

type Endpoint = Schemas['WebhookEndpoint'];
type Changes = Schemas['WebhookEndpointUpdate'];
type EventType = Schemas['WebhookEventType'];

/** Lines of a textarea, trimmed, blank ones dropped. */
const linesOf = (text: string): string[] => text.split('\n').map((line) => line.trim()).filter(Boolean);

/** A list field as the API takes it: null for "any" (nothing listed). */
const listOrNull = (items: string[]): string[] | null => (items.length ? items : null);

const sameList = (a: readonly string[] | null, b: readonly string[] | null): boolean => JSON.stringify(a) === JSON.stringify(b);

/** `Name: value` lines of the headers field; a sensitive header is shown with no value, which must be typed again to keep it. */
function headerLines(endpoint: Endpoint): string {
  const sensitive = endpoint.sensitive_headers.map((name) => `${name}: `);
  return [...Object.entries(endpoint.headers).map(([name, value]) => `${name}: ${value}`), ...sensitive].join('\n');
}

/** The headers field as the API takes it, or the line that cannot be sent. */
function parseHeaders(text: string): { headers: Record<string, string> } | { problem: string } {
  const headers: Record<string, string> = {};
  for (const line of linesOf(text)) {
    const colon = line.indexOf(':');
    if (colon < 1) return { problem: `"${line}" is not a header: write it as Name: value` };
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    if (!value) return { problem: `Give the value of ${name} (a secret header's value is never shown: type it again to keep it), or remove its line` };
    headers[name] = value;
  }
  return { headers };
}

/**
 * The endpoint's settings as a form: where it posts, what it sends (types, conversations, tags), how fast
 * (rate limit) and with which custom headers. Only what changed is sent, as one `PATCH`; the server's answer
 * (a 422 names the field) is shown beside the form.
 */
export function endpointSettings(endpoint: Endpoint, eventTypes: EventType[], saved: (endpoint: Endpoint) => void): HTMLElement {
  const section = h('section', { class: 'card stack', 'aria-labelledby': 'settings-title', id: 'endpoint-settings' });
  const message = h('div', { 'aria-live': 'polite', id: 'settings-message' });
  const field = (id: string, label: string, control: HTMLElement, hint?: string) =>
    h('div', { class: 'field' }, h('label', { for: id }, label), control, hint ? h('p', { class: 'hint', id: `${id}-hint` }, hint) : null);

  const url = h('input', { id: 'settings-url', type: 'url', required: true, maxlength: 2048, autocomplete: 'off', value: endpoint.url });
  const description = h('input', { id: 'settings-description', maxlength: 500, autocomplete: 'off', value: endpoint.description });
  const enabled = h('input', { id: 'settings-enabled', type: 'checkbox', checked: !endpoint.disabled });
  const rateLimit = h('input', { id: 'settings-rate-limit', type: 'number', min: 1, max: 10000, step: 1, inputmode: 'numeric', value: endpoint.rate_limit ?? '', 'aria-describedby': 'settings-rate-limit-hint' });
  const conversations = h('textarea', { id: 'settings-conversations', rows: 3, spellcheck: 'false', 'aria-describedby': 'settings-conversations-hint' });
  conversations.value = (endpoint.conversation_ids ?? []).join('\n');
  const tags = h('textarea', { id: 'settings-tags', rows: 3, spellcheck: 'false', 'aria-describedby': 'settings-tags-hint' });
  tags.value = (endpoint.tags ?? []).join('\n');
  const headers = h('textarea', { id: 'settings-headers', rows: 3, spellcheck: 'false', 'aria-describedby': 'settings-headers-hint' });
  const shownHeaders = headerLines(endpoint);
  headers.value = shownHeaders;
  const typeBoxes = eventTypes.map((type) => h('input', { type: 'checkbox', value: type, id: `settings-type-${type}`, checked: endpoint.event_types?.includes(type) ?? false }));
  const types = h(
    'fieldset',
    { class: 'checks', id: 'settings-types' },
    h('legend', null, 'Event types'),
    h('p', { class: 'hint' }, 'None ticked: every type.'),
    typeBoxes.map((box) => h('label', { class: 'check', for: box.id }, box, box.value)),
  );

  /** What differs from the endpoint as loaded, or the first problem found before asking the server. */
  const changes = (): { changes: Changes } | { problem: string } => {
    const next: Changes = {};
    if (url.value.trim() !== endpoint.url) next.url = url.value.trim();
    if (description.value !== endpoint.description) next.description = description.value;
    if (enabled.checked === endpoint.disabled) next.disabled = !enabled.checked;
    const limit = rateLimit.value.trim() === '' ? null : Number(rateLimit.value);
    if (limit !== endpoint.rate_limit) next.rate_limit = limit;
    const ticked = listOrNull(typeBoxes.filter((box) => box.checked).map((box) => box.value)) as EventType[] | null;
    if (!sameList(ticked, endpoint.event_types)) next.event_types = ticked;
    const ids = listOrNull(linesOf(conversations.value));
    if (!sameList(ids, endpoint.conversation_ids)) next.conversation_ids = ids;
    const tagList = listOrNull(linesOf(tags.value));
    if (!sameList(tagList, endpoint.tags)) next.tags = tagList;
    // Headers are replaced as a whole: sent only when edited, since a secret one must then be typed again.
    if (headers.value.trim() !== shownHeaders.trim()) {
      const parsed = parseHeaders(headers.value);
      if ('problem' in parsed) return parsed;
      next.headers = parsed.headers;
    }
    return { changes: next };
  };

  const form = h(
    'form',
    { class: 'settings-form', id: 'settings-form', novalidate: true },
    h('div', { class: 'form-grid wide' }, field('settings-url', 'URL', url), field('settings-description', 'Description', description)),
    h('label', { class: 'check', for: 'settings-enabled' }, enabled, 'Enabled: messages are sent'),
    types,
    h(
      'div',
      { class: 'form-grid wide' },
      field('settings-conversations', 'Only these conversations', conversations, 'One conversation id a line; empty: any conversation.'),
      field('settings-tags', 'Only conversations tagged', tags, 'One key:value a line, all must match; empty: any.'),
      field('settings-headers', 'Custom headers', headers, 'One Name: value a line. Secret headers show no value: type it again when you change the headers.'),
      field('settings-rate-limit', 'Rate limit (messages a second)', rateLimit, 'Empty: no limit.'),
    ),
    h('div', { class: 'inline-form' }, h('button', { type: 'submit', class: 'btn primary' }, 'Save settings')),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const result = changes();
    if ('problem' in result) return replace(message, notice(result.problem, 'error'));
    if (Object.keys(result.changes).length === 0) return replace(message, notice('Nothing changed.'));
    const { data, error, response } = await api.PATCH('/api/v1/webhook-endpoints/{endpoint_id}', {
      params: { path: { endpoint_id: endpoint.id } },
      body: result.changes,
    });
    if (!data) return replace(message, notice(describeError(error, response.status), 'error'));
    saved(data);
  });
  replace(section, h('h2', { id: 'settings-title' }, 'Settings'), form, message);
  return section;
}
