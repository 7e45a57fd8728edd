import { badge, h, sizeOf, time } from '../dom.ts';
import { renderMarkdown } from './markdown.ts';
import { field, type AnyEvent, type ConversationRows, type EventRow, type PendingRow, type Row, type StoredEvent } from './rows.ts';

/** Terminal output longer than this many lines is folded. */
const FOLD_LINES = 24;
/** Output beyond this many characters is shown only on request. */
const OUTPUT_LIMIT = 100_000;

type Content = { type?: string; text?: string; image_urls?: string[] };

/** The text of a list of content blocks (text blocks joined; images named). */
export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return (content as Content[])
    .map((block) => (block.type === 'image' ? `[${block.image_urls?.length ?? 0} image(s)]` : (block.text ?? '')))
    .filter(Boolean)
    .join('\n\n');
}

/** One row of the conversation. */
export function renderRow(row: Row, rows: ConversationRows, loadOlder: () => void): HTMLElement {
  if (row.type === 'older') return olderRow(row.state, loadOlder);
  if (row.type === 'pending') return pendingRow(row);
  return eventRow(row, rows);
}

function olderRow(state: 'more' | 'loading' | 'start' | 'error', loadOlder: () => void): HTMLElement {
  if (state === 'start') return h('div', { class: 'row' }, h('p', { class: 'divider' }, 'Start of the conversation'));
  const button = h('button', { type: 'button', class: 'btn small', disabled: state === 'loading' }, state === 'loading' ? 'Loading older events…' : state === 'error' ? 'Could not load older events: retry' : 'Load older events');
  button.addEventListener('click', loadOlder);
  return h('div', { class: 'row center' }, button);
}

function pendingRow(row: PendingRow): HTMLElement {
  return h(
    'div',
    { class: 'row', id: 'pending' },
    h(
      'article',
      { class: 'message agent pending', 'aria-label': 'Agent is writing' },
      h('header', null, h('span', { class: 'who' }, 'Agent'), h('span', { class: 'typing' }, 'writing…')),
      row.reasoning ? thinking(row.reasoning) : null,
      h('div', { class: 'text plain' }, row.content),
    ),
  );
}

function eventRow(row: EventRow, rows: ConversationRows): HTMLElement {
  const { stored } = row;
  const event = stored.event;
  const branch = rows.branchOf(event);
  const body = renderEvent(stored, row.results);
  const element = h('div', { class: 'row', 'data-kind': event.kind, 'data-seq': stored.seq }, body);
  if (branch) {
    element.classList.add('branch');
    element.dataset.branch = String(branch.index);
    element.prepend(h('p', { class: 'branch-label' }, `Branch ${branch.index} of ${branch.total}`));
  }
  return element;
}

function meta(stored: StoredEvent, ...extra: (Node | string | null)[]): HTMLElement {
  return h('span', { class: 'stamp' }, ...extra, time(stored.received_at, 'time'), ` · #${stored.seq}`);
}

function thinking(text: string, label = 'Thinking'): HTMLElement {
  return h('details', { class: 'thinking' }, h('summary', null, label), h('div', { class: 'text' }, renderMarkdown(text)));
}

/** Reasoning of a message or action: `reasoning_content`, thinking blocks, a reasoning item's summary. */
function reasoningOf(source: Record<string, unknown> | undefined | null): HTMLElement | null {
  if (!source) return null;
  const parts: string[] = [];
  if (typeof source.reasoning_content === 'string' && source.reasoning_content) parts.push(source.reasoning_content);
  for (const block of (source.thinking_blocks as { type?: string; thinking?: string }[] | null) ?? []) {
    if (block.type === 'thinking' && block.thinking) parts.push(block.thinking);
    else if (block.type === 'redacted_thinking') parts.push('*(redacted thinking)*');
  }
  const item = source.responses_reasoning_item as { summary?: string[] } | null | undefined;
  for (const line of item?.summary ?? []) parts.push(line);
  return parts.length ? thinking(parts.join('\n\n')) : null;
}

function renderEvent(stored: StoredEvent, results: StoredEvent[]): HTMLElement {
  const event = stored.event as AnyEvent & Record<string, unknown>;
  switch (event.kind) {
    case 'MessageEvent': {
      const message = (event.llm_message ?? {}) as Record<string, unknown>;
      const fromUser = event.source === 'user';
      const text = textOf(message.content) + (event.extended_content ? '' : '');
      const skills = (event.activated_skills as string[] | undefined) ?? [];
      return h(
        'article',
        { class: `message ${fromUser ? 'user' : 'agent'}` },
        h('header', null, h('span', { class: 'who' }, fromUser ? 'User' : event.source === 'agent' ? 'Agent' : String(event.source)), meta(stored)),
        reasoningOf(message),
        h('div', { class: 'text' }, renderMarkdown(text)),
        skills.length ? h('p', { class: 'chips' }, ...skills.map((skill) => h('span', { class: 'chip' }, skill))) : null,
      );
    }
    case 'ActionEvent':
      return actionCard(stored, results);
    case 'ACPToolCallEvent':
      return h(
        'article',
        { class: `card action${event.is_error ? ' failed' : ''}` },
        h('header', null, h('span', { class: 'tool' }, String(event.tool_kind ?? 'tool')), h('span', { class: 'summary' }, String(event.title ?? '')), event.status ? badge(String(event.status)) : null, meta(stored)),
        event.raw_input !== undefined && event.raw_input !== null ? argumentsBlock(event.raw_input) : null,
        output(textOf(event.content) || stringify(event.raw_output), Boolean(event.is_error)),
      );
    case 'ObservationEvent':
    case 'UserRejectObservation':
      return h('article', { class: 'card action' }, h('header', null, h('span', { class: 'tool' }, String(event.tool_name ?? 'tool')), h('span', { class: 'summary' }, 'Result'), meta(stored)), result(stored));
    case 'AgentErrorEvent':
      return errorCard(stored, `Agent error${event.tool_name ? ` in ${String(event.tool_name)}` : ''}`, String(event.error ?? ''));
    case 'ConversationErrorEvent':
    case 'ServerErrorEvent':
      return errorCard(stored, `${event.kind === 'ServerErrorEvent' ? 'Server' : 'Conversation'} error: ${String(event.code ?? '')}`, String(event.detail ?? ''));
    case 'HookExecutionEvent': {
      const ok = Boolean(event.success) && !event.blocked;
      return h(
        'details',
        { class: `hook${ok ? '' : ' failed'}` },
        h('summary', null, h('span', { class: 'tool' }, 'Hook'), ` ${String(event.hook_event_type)} · `, h('code', null, String(event.hook_command)), ' ', h('span', { class: ok ? 'ok' : 'bad' }, event.blocked ? 'blocked' : ok ? 'passed' : `failed (exit ${String(event.exit_code)})`), meta(stored)),
        event.reason ? h('p', null, String(event.reason)) : null,
        event.stdout ? output(String(event.stdout), false, 'stdout') : null,
        event.stderr ? output(String(event.stderr), true, 'stderr') : null,
        event.error ? h('p', { class: 'bad' }, String(event.error)) : null,
      );
    }
    case 'Condensation': {
      const forgotten = (event.forgotten_event_ids as string[] | undefined)?.length ?? 0;
      return h('div', { class: 'divider-block' }, h('p', { class: 'divider' }, `Context condensed: ${forgotten} earlier event${forgotten === 1 ? '' : 's'} summarised`), event.summary ? thinking(String(event.summary), 'Summary') : null);
    }
    case 'CondensationRequest':
      return h('p', { class: 'divider' }, 'Condensation requested');
    case 'CondensationSummaryEvent':
      return h('div', { class: 'divider-block' }, h('p', { class: 'divider' }, 'Summary of earlier context'), thinking(String(event.summary ?? ''), 'Summary'));
    case 'ConversationStateUpdateEvent':
      return h('p', { class: 'system' }, event.key === 'execution_status' ? ['Status → ', badge(String(event.value))] : `State updated (${String(event.key ?? '')})`, meta(stored));
    case 'PauseEvent':
      return h('p', { class: 'system' }, 'Paused by the user', meta(stored));
    case 'InterruptEvent':
      return h('p', { class: 'system' }, 'Interrupted by the user', meta(stored));
    case 'SystemPromptEvent': {
      const tools = (event.tools as { title?: string; kind?: string }[] | undefined) ?? [];
      return h(
        'details',
        { class: 'system-prompt' },
        h('summary', null, `System prompt · ${tools.length} tool${tools.length === 1 ? '' : 's'}`, meta(stored)),
        h('div', { class: 'text' }, renderMarkdown(textOf([event.system_prompt]))),
        tools.length ? h('p', { class: 'chips' }, ...tools.map((tool) => h('span', { class: 'chip' }, tool.title ?? tool.kind ?? 'tool'))) : null,
      );
    }
    case 'TokenEvent':
      return h('p', { class: 'system' }, `Tokens: ${(event.prompt_token_ids as unknown[] | undefined)?.length ?? 0} prompt, ${(event.response_token_ids as unknown[] | undefined)?.length ?? 0} response`, meta(stored));
    case 'LLMCompletionLogEvent':
      return h('p', { class: 'system' }, `LLM completion log ${String(event.filename ?? '')} (${String(event.model_name ?? '')})`, meta(stored));
    default:
      return h('details', { class: 'system-prompt' }, h('summary', null, event.kind, meta(stored)), h('pre', { class: 'output', tabindex: 0 }, stringify(event)));
  }
}

const RISKS = new Set(['LOW', 'MEDIUM', 'HIGH', 'UNKNOWN']);

function actionCard(stored: StoredEvent, results: StoredEvent[]): HTMLElement {
  const event = stored.event as AnyEvent & Record<string, unknown>;
  const action = (event.action ?? {}) as Record<string, unknown>;
  const risk = typeof event.security_risk === 'string' && RISKS.has(event.security_risk) ? event.security_risk : null;
  const summary = typeof event.summary === 'string' && event.summary ? event.summary : String(action.kind ?? 'Action');
  let detail: HTMLElement;
  if (typeof action.command === 'string') detail = h('pre', { class: 'command', tabindex: 0 }, h('span', { class: 'prompt', 'aria-hidden': 'true' }, '$ '), action.command);
  else if (typeof action.path === 'string') detail = h('p', { class: 'path' }, `${String(action.command ?? action.kind ?? '')} `, h('code', null, action.path));
  else detail = argumentsBlock(withoutKind(action) ?? field(event, 'tool_call'));
  const thought = textOf(event.thought);
  return h(
    'article',
    { class: 'card action' },
    h('header', null, h('span', { class: 'tool' }, String(event.tool_name ?? 'tool')), h('span', { class: 'summary' }, summary), risk ? h('span', { class: 'risk', 'data-risk': risk }, `${risk.toLowerCase()} risk`) : null, meta(stored)),
    thought ? h('div', { class: 'text thought' }, renderMarkdown(thought)) : null,
    reasoningOf(event),
    detail,
    results.length ? results.map(result) : h('p', { class: 'hint waiting' }, 'No result yet'),
  );
}

function withoutKind(action: Record<string, unknown>): Record<string, unknown> | undefined {
  const { kind: _kind, ...rest } = action;
  return Object.keys(rest).length ? rest : undefined;
}

function argumentsBlock(value: unknown): HTMLElement {
  let shown = value;
  if (typeof value === 'object' && value && 'arguments' in value && typeof (value as { arguments: unknown }).arguments === 'string') {
    try {
      shown = JSON.parse((value as { arguments: string }).arguments);
    } catch {
      shown = (value as { arguments: string }).arguments;
    }
  }
  return h('pre', { class: 'arguments', tabindex: 0 }, stringify(shown));
}

/** An observation or rejection under its action. */
function result(stored: StoredEvent): HTMLElement {
  const event = stored.event as AnyEvent & Record<string, unknown>;
  if (event.kind === 'UserRejectObservation') {
    return h('div', { class: 'result rejected' }, h('p', null, h('strong', null, 'Rejected'), ` by ${String(event.rejection_source ?? 'user')}: `, String(event.rejection_reason ?? '')));
  }
  const observation = (event.observation ?? {}) as Record<string, unknown>;
  const isError = Boolean(observation.is_error) || (typeof observation.exit_code === 'number' && observation.exit_code !== 0 && observation.exit_code !== -1);
  const label = typeof observation.exit_code === 'number' ? `exit ${observation.exit_code}` : isError ? 'error' : 'output';
  return h('div', { class: `result${isError ? ' failed' : ''}` }, output(textOf(observation.content) || stringify(withoutKind(observation)), isError, label));
}

/** Terminal-like output: monospace, long output folded, errors marked. */
function output(text: string, isError: boolean, label = isError ? 'error' : 'output'): HTMLElement {
  const block = h('div', { class: `output-block${isError ? ' failed' : ''}` });
  block.append(h('p', { class: 'output-label' }, isError ? h('span', { class: 'bad' }, `✕ ${label}`) : label));
  const limited = text.length > OUTPUT_LIMIT ? text.slice(0, OUTPUT_LIMIT) : text;
  const pre = h('pre', { class: 'output', tabindex: 0 }, limited);
  let lines = 1;
  for (let i = limited.indexOf('\n'); i >= 0 && lines <= FOLD_LINES; i = limited.indexOf('\n', i + 1)) lines++;
  if (lines > FOLD_LINES) {
    pre.classList.add('folded-output');
    const toggle = h('button', { type: 'button', class: 'btn small', 'aria-expanded': 'false' }, 'Show all output');
    toggle.addEventListener('click', () => {
      const folded = pre.classList.toggle('folded-output');
      toggle.setAttribute('aria-expanded', String(!folded));
      toggle.textContent = folded ? 'Show all output' : 'Fold output';
    });
    block.append(pre, toggle);
  } else block.append(pre);
  if (limited.length < text.length) {
    const more = h('button', { type: 'button', class: 'btn small' }, `Show the whole output (${sizeOf(text.length)})`);
    more.addEventListener('click', () => {
      pre.textContent = text;
      more.remove();
    });
    block.append(more);
  }
  return block;
}

function errorCard(stored: StoredEvent, title: string, detail: string): HTMLElement {
  return h('article', { class: 'card error' }, h('header', null, h('span', { class: 'bad' }, '✕ '), h('span', { class: 'summary' }, title), meta(stored)), h('pre', { class: 'output', tabindex: 0 }, detail));
}

function stringify(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  return JSON.stringify(value, null, 2);
}
