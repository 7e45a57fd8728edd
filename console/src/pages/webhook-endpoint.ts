import { api, describeError, type Schemas } from '../api.ts';
import { confirmedAction } from '../confirm.ts';
import { badge, h, notice, replace, time } from '../dom.ts';
import type { Page } from '../main.ts';
import { endpointSettings } from './webhook-endpoint-settings.ts';

type Window = Schemas['WebhookEndpointStats']['window'];
type Task = Schemas['WebhookRecoverTask'] | Schemas['WebhookMessageRetryTask'];
type MessageState = Schemas['WebhookMessage']['state'];
type EventType = Schemas['WebhookEventType'];

/** One webhook endpoint: how it is doing (stats), its message log (filtered, with "Retry these"), a test send and a recovery. */
export const webhookEndpointPage: Page = (main, route) => {
  const id = route.id!;
  const path = { params: { path: { endpoint_id: id } } };
  let timer: ReturnType<typeof setTimeout> | undefined;
  let gone = false;
  const head = h('div', { class: 'page-head' }, h('h1', null, 'Webhook endpoint'));
  const stats = h('section', { class: 'card stack', 'aria-labelledby': 'stats-title' });
  const actions = h('section', { class: 'card stack', 'aria-labelledby': 'actions-title' });
  const log = h('section', { class: 'card stack', 'aria-labelledby': 'log-title' });
  const settings = h('div');
  replace(main, h('p', { class: 'crumbs' }, h('a', { href: '#/account' }, 'Account')), head, h('div', { class: 'grid' }, stats, actions), settings, log);

  const showStats = async (window: Window) => {
    const { data, error, response } = await api.GET('/api/v1/webhook-endpoints/{endpoint_id}/stats', { params: { path: { endpoint_id: id }, query: { window } } });
    const title = h('h2', { id: 'stats-title' }, 'Health');
    if (!data) return replace(stats, title, notice(describeError(error, response.status), 'error'));
    const picker = h(
      'div',
      { class: 'inline-form', role: 'group', 'aria-label': 'Window' },
      (['1h', '24h', '7d'] as Window[]).map((w) => h('button', { type: 'button', class: 'btn small', 'aria-pressed': String(w === window), onclick: () => void showStats(w) }, `Last ${w}`)),
    );
    const fact = (label: string, value: string | HTMLElement) => h('div', null, h('dt', null, label), h('dd', null, value));
    const ms = (value: number | null) => (value === null ? '–' : `${Math.round(value)} ms`);
    replace(
      stats,
      h('div', { class: 'section-head' }, title, badge(data.state)),
      picker,
      h(
        'dl',
        { class: 'facts complete', id: 'endpoint-stats' },
        fact('Attempts', String(data.attempts)),
        fact('Succeeded', String(data.succeeded)),
        fact('Failed 4xx', String(data.failed['4xx'])),
        fact('Failed 5xx', String(data.failed['5xx'])),
        fact('No response', String(data.failed.no_response)),
        fact('Other', String(data.failed['3xx'] + data.failed.other)),
        fact('p50', ms(data.latency_ms.p50)),
        fact('p99', ms(data.latency_ms.p99)),
        fact('Last success', data.last_success_at ? time(data.last_success_at, 'time') : 'never'),
        data.failing_since ? fact('Failing since', time(data.failing_since, 'time')) : null,
      ),
    );
  };

  // The message log's filters; "Retry these" sends their failed (or succeeded) messages again as one task.
  const stateFilter = h('select', { id: 'log-status' }, h('option', { value: '' }, 'Any state'), ...(['failed', 'pending', 'succeeded'] as MessageState[]).map((value) => h('option', { value }, value)));
  const typeFilter = h('select', { id: 'log-type' }, h('option', { value: '' }, 'Any type'));
  const conversationFilter = h('input', { id: 'log-conversation', type: 'text', maxlength: 36, autocomplete: 'off', spellcheck: 'false', placeholder: 'Conversation id' });
  const sinceFilter = h('input', { id: 'log-since', type: 'datetime-local' });
  const filterForm = h(
    'form',
    { class: 'filters', role: 'search', id: 'log-filters', 'aria-label': 'Messages by state, type, conversation and time' },
    h('div', null, h('label', { for: 'log-status' }, 'State'), stateFilter),
    h('div', null, h('label', { for: 'log-type' }, 'Type'), typeFilter),
    h('div', { class: 'grow' }, h('label', { for: 'log-conversation' }, 'Conversation'), conversationFilter),
    h('div', null, h('label', { for: 'log-since' }, 'Stored since'), sinceFilter),
    h('button', { type: 'submit', class: 'btn primary' }, 'Filter'),
  );
  filterForm.addEventListener('submit', (event) => {
    event.preventDefault();
    void showLog();
  });
  const eventTypes = api.GET('/api/v1/webhook-event-types').then(({ data }) => (data?.items ?? []).map((item) => item.type));
  void eventTypes.then((types) => {
    for (const type of types) typeFilter.append(h('option', { value: type }, type));
  });
  const logFilter = () => ({
    ...(stateFilter.value ? { status: stateFilter.value as MessageState } : {}),
    ...(typeFilter.value ? { event_type: typeFilter.value as EventType } : {}),
    ...(conversationFilter.value.trim() ? { conversation_id: conversationFilter.value.trim() } : {}),
    ...(sinceFilter.value ? { since: new Date(sinceFilter.value).toISOString() } : {}),
  });
  const retryProgress = h('div', { 'aria-live': 'polite', id: 'retry-progress' });
  const logBody = h('div', { class: 'stack' });

  /** "Retry these": the log's filter as one bulk retry; pending messages are being delivered already, so none for them. */
  const retryAction = (filter: ReturnType<typeof logFilter>) => {
    if (filter.status === 'pending') return h('p', { class: 'hint' }, 'Pending messages are being delivered; there is nothing to retry.');
    const status = filter.status ?? 'failed';
    // One key per offered action: sending it twice (a retried request) starts one task.
    const key = Array.from(crypto.getRandomValues(new Uint8Array(16)), (byte) => byte.toString(16).padStart(2, '0')).join('');
    const offer = h('div', { class: 'stack', id: 'retry-these' });
    replace(
      offer,
      h(
        'div',
        { class: 'inline-form' },
        confirmedAction({
          label: filter.status ? 'Retry these' : 'Retry the failed ones',
          confirm: `Retry every ${status} message this filter selects`,
          target: 'messages',
          danger: false,
          act: async () => {
            const { data, error, response } = await api.POST('/api/v1/webhook-endpoints/{endpoint_id}/message-retries', {
              params: { path: { endpoint_id: id }, header: { 'Idempotency-Key': key } },
              body: { ...filter, status },
            });
            if (!data) return describeError(error, response.status);
            // Offered again once the task has finished and the log is shown again.
            offer.replaceChildren();
            void follow(data, retryProgress);
            return undefined;
          },
        }),
      ),
      h('p', { class: 'hint' }, `Sends every ${status} message matching the filter again (of the last 14 days, not only those shown), oldest first, with the same webhook-id.`),
    );
    return offer;
  };

  const showLog = async () => {
    const filter = logFilter();
    const { data, error, response } = await api.GET('/api/v1/webhook-endpoints/{endpoint_id}/messages', { params: { path: { endpoint_id: id }, query: { limit: 50, ...filter } } });
    if (!data) return replace(logBody, notice(describeError(error, response.status), 'error'));
    const filtered = Object.keys(filter).length > 0;
    replace(
      logBody,
      data.items.length ? retryAction(filter) : null,
      data.items.length
        ? h(
            'div',
            { class: 'table-wrap' },
            h(
              'table',
              { class: 'list compact stacked', id: 'endpoint-messages' },
              h('caption', { class: 'visually-hidden' }, filtered ? 'The 50 newest messages the filter selects' : 'The endpoint\'s 50 newest messages'),
              h('thead', null, h('tr', null, ['Message', 'Type', 'State', 'Attempts', 'Last answer', 'Stored'].map((label) => h('th', { scope: 'col' }, label)))),
              h(
                'tbody',
                null,
                data.items.map((m) =>
                  h(
                    'tr',
                    null,
                    h('td', { 'data-label': 'Message' }, h('code', null, m.id)),
                    h('td', { 'data-label': 'Type' }, m.type),
                    h('td', { 'data-label': 'State' }, badge(m.state)),
                    h('td', { 'data-label': 'Attempts' }, String(m.attempts)),
                    h('td', { 'data-label': 'Last answer' }, m.last_error ?? (m.last_status_code === null ? '–' : String(m.last_status_code))),
                    h('td', { 'data-label': 'Stored' }, time(m.created_at, 'time')),
                  ),
                ),
              ),
            ),
          )
        : h('p', { class: 'empty' }, filtered ? 'No message matches this filter.' : 'No messages yet.'),
    );
  };
  replace(log, h('h2', { id: 'log-title' }, 'Messages'), filterForm, retryProgress, logBody);

  const refresh = () => Promise.all([showStats('24h'), showLog()]);

  const message = h('div', { 'aria-live': 'polite' });
  const progress = h('div', { 'aria-live': 'polite', id: 'recover-progress' });
  const since = h('input', { id: 'recover-since', type: 'datetime-local', required: true, value: localInput(new Date(Date.now() - 86_400_000)) });
  const recover = h(
    'form',
    { class: 'form-grid', id: 'recover' },
    h('div', null, h('label', { for: 'recover-since' }, 'Re-send failed messages since'), since),
    h('button', { type: 'submit', class: 'btn' }, 'Recover'),
  );
  /** Shows a task's progress in `where`, polling it each second until it has finished. */
  const follow = async (task: Task, where: HTMLElement) => {
    const what = 'filter' in task ? 'Retry' : 'Recovery';
    replace(where, notice(`${what} ${task.state}: ${task.sent} of ${task.total} sent, ${task.succeeded} accepted${task.last_error ? ` — stopped at ${task.last_error}` : ''}.`, task.state === 'failed' ? 'error' : 'info'));
    if (task.state !== 'running' || gone) return void refresh();
    timer = setTimeout(async () => {
      const params = { params: { path: { endpoint_id: id, task_id: task.id } } };
      const { data } = 'filter' in task
        ? await api.GET('/api/v1/webhook-endpoints/{endpoint_id}/message-retries/{task_id}', params)
        : await api.GET('/api/v1/webhook-endpoints/{endpoint_id}/recover/{task_id}', params);
      if (data && !gone) void follow(data, where);
    }, 1_000);
  };
  recover.addEventListener('submit', async (event) => {
    event.preventDefault();
    const { data, error, response } = await api.POST('/api/v1/webhook-endpoints/{endpoint_id}/recover', { ...path, body: { since: new Date(since.value).toISOString() } });
    if (!data) return replace(progress, notice(describeError(error, response.status), 'error'));
    void follow(data, progress);
  });
  const test = h('button', {
    type: 'button',
    class: 'btn',
    id: 'send-test',
    onclick: async () => {
      const { response, error } = await api.POST('/api/v1/webhook-endpoints/{endpoint_id}/test', path);
      replace(message, response.ok ? notice('Test message queued.') : notice(describeError(error, response.status), 'error'));
      void refresh();
    },
  }, 'Send test');
  replace(actions, h('h2', { id: 'actions-title' }, 'Actions'), h('div', { class: 'inline-form' }, test), message, recover, progress);

  /** The head, the disabled notice and the settings form, for the endpoint as loaded or just saved. */
  const show = async (endpoint: Schemas['WebhookEndpoint'], justSaved = false) => {
    replace(head, h('h1', { class: 'meta' }, endpoint.url), endpoint.description ? h('p', { class: 'hint' }, endpoint.description) : null);
    if (endpoint.disabled) replace(message, notice(`Disabled${endpoint.disabled_reason ? `: ${endpoint.disabled_reason}` : ''}. Enable it before recovering or retrying its messages.`, 'error'));
    else message.replaceChildren();
    const form = endpointSettings(endpoint, await eventTypes, (updated) => void show(updated, true));
    replace(settings, form);
    if (justSaved) replace(form.querySelector('#settings-message')!, notice('Settings saved.'));
  };
  void api.GET('/api/v1/webhook-endpoints/{endpoint_id}', path).then(({ data, error, response }) => {
    if (!data) return replace(main, h('h1', null, 'Webhook endpoint'), notice(describeError(error, response.status), 'error'));
    void show(data);
  });
  void refresh();
  return () => {
    gone = true;
    clearTimeout(timer);
  };
};

/** A `datetime-local` value for `date` in the browser's time zone. */
function localInput(date: Date): string {
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}
