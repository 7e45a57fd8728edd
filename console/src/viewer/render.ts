import { badge, h, money } from '../dom.ts';
import { argumentsTable, duration, failed, output, rawJson, stringify, textOf, type Fields } from './cards/common.ts';
import { familyOfAction, familyOfObservation } from './cards/index.ts';
import { renderMarkdown } from './markdown.ts';
import { field, type AnyEvent, type ConversationRows, type EventRow, type PendingRow, type Row, type StoredEvent } from './rows.ts';
import { eventTime, type ResponseUsage } from './timing.ts';

/** A pause between two events at least this long is shown as an idle gap. */
const IDLE_GAP_MS = 10_000;
const clock = new Intl.DateTimeFormat(undefined, { timeStyle: 'medium' });

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
  const body = renderEvent(stored, row.results, rows);
  const element = h('div', { class: 'row', 'data-kind': event.kind, 'data-seq': stored.seq, tabindex: -1 }, body);
  const gap = rows.gapBefore(stored.seq);
  if (gap !== undefined && gap >= IDLE_GAP_MS) element.prepend(h('p', { class: 'idle-gap' }, `idle ${duration(gap)}`));
  if (branch) {
    element.classList.add('branch');
    element.dataset.branch = String(branch.index);
    element.prepend(h('p', { class: 'branch-label' }, `Branch ${branch.index} of ${branch.total}`));
  }
  return element;
}

/** The event's time (its own `timestamp`, else when it was received) and a link to it. */
function meta(stored: StoredEvent, rows: ConversationRows, link = true): HTMLElement {
  const at = eventTime(stored);
  const title = `${at.iso}${at.source === 'received' ? ' (received; the event carries no time of its own)' : ''}`;
  return h(
    'span',
    { class: 'stamp' },
    Number.isFinite(at.ms) ? h('time', { datetime: at.iso, title, 'data-source': at.source }, clock.format(at.ms)) : '–',
    ' · ',
    // Inside a <summary> (itself interactive) the number is plain text.
    link ? h('a', { class: 'permalink', href: rows.eventHref(stored.seq), title: 'Link to this event' }, `#${stored.seq}`) : `#${stored.seq}`,
  );
}

/** Tokens, cost and latency of the LLM response behind a message or action, when a completion log carries them. */
function usageChip(usage: ResponseUsage | undefined): HTMLElement | null {
  if (!usage) return null;
  const parts: (Node | string)[] = [];
  if (usage.promptTokens !== undefined) parts.push(`${usage.promptTokens.toLocaleString()} in`);
  if (usage.completionTokens !== undefined) parts.push(`${usage.completionTokens.toLocaleString()} out`);
  if (usage.costUsd !== undefined) parts.push(money(usage.costUsd));
  if (usage.latencyMs !== undefined) parts.push(`LLM ${duration(usage.latencyMs)}`);
  if (!parts.length) return null;
  return h('span', { class: 'usage', title: `LLM response ${usage.responseId}` }, parts.flatMap((part, i) => (i ? [' · ', part] : [part])));
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

function renderEvent(stored: StoredEvent, results: StoredEvent[], rows: ConversationRows): HTMLElement {
  if (stored.unrecognized) return unrecognizedCard(stored, stored.unrecognized, rows);
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
        h('header', null, h('span', { class: 'who' }, fromUser ? 'User' : event.source === 'agent' ? 'Agent' : String(event.source)), usageChip(rows.usageOf(event.llm_response_id)), meta(stored, rows)),
        reasoningOf(message),
        h('div', { class: 'text' }, renderMarkdown(text)),
        skills.length ? h('p', { class: 'chips' }, ...skills.map((skill) => h('span', { class: 'chip' }, skill))) : null,
      );
    }
    case 'ActionEvent':
      return actionCard(stored, results, rows);
    case 'ACPToolCallEvent':
      return h(
        'article',
        { class: `card action${event.is_error ? ' failed' : ''}`, 'data-card': 'acp-tool' },
        h('header', null, h('span', { class: 'tool' }, String(event.tool_kind ?? 'tool')), h('span', { class: 'summary' }, String(event.title ?? '')), event.status ? badge(String(event.status)) : null, meta(stored, rows)),
        event.raw_input && typeof event.raw_input === 'object' ? argumentsTable(event.raw_input as Fields, `Input of ${String(event.title ?? 'the tool')}`) : event.raw_input ? h('pre', { class: 'arguments', tabindex: 0 }, stringify(event.raw_input)) : null,
        output(textOf(event.content) || stringify(event.raw_output), Boolean(event.is_error)),
      );
    case 'ObservationEvent':
    case 'UserRejectObservation':
      return h('article', { class: 'card action' }, h('header', null, h('span', { class: 'tool' }, String(event.tool_name ?? 'tool')), h('span', { class: 'summary' }, 'Result (its action is not loaded)'), meta(stored, rows)), result(stored, undefined));
    case 'AgentErrorEvent':
      return errorCard(stored, rows, `Agent error${event.tool_name ? ` in ${String(event.tool_name)}` : ''}`, String(event.error ?? ''));
    case 'ConversationErrorEvent':
    case 'ServerErrorEvent':
      return errorCard(stored, rows, `${event.kind === 'ServerErrorEvent' ? 'Server' : 'Conversation'} error: ${String(event.code ?? '')}`, String(event.detail ?? ''));
    case 'HookExecutionEvent': {
      const ok = Boolean(event.success) && !event.blocked;
      return h(
        'details',
        { class: `hook${ok ? '' : ' failed'}`, 'data-card': 'hook' },
        h('summary', null, h('span', { class: 'tool' }, 'Hook'), ` ${String(event.hook_event_type)} · `, h('code', null, String(event.hook_command)), ' ', h('span', { class: ok ? 'ok' : 'bad' }, event.blocked ? 'blocked' : ok ? 'passed' : `failed (exit ${String(event.exit_code)})`), meta(stored, rows, false)),
        event.reason ? h('p', null, String(event.reason)) : null,
        event.stdout ? output(String(event.stdout), false, 'stdout') : null,
        event.stderr ? output(String(event.stderr), true, 'stderr') : null,
        event.error ? h('p', { class: 'bad' }, String(event.error)) : null,
      );
    }
    case 'Condensation': {
      const forgotten = (event.forgotten_event_ids as string[] | undefined)?.length ?? 0;
      return h('div', { class: 'divider-block', 'data-card': 'condensation' }, h('p', { class: 'divider' }, `Context condensed: ${forgotten} earlier event${forgotten === 1 ? '' : 's'} summarised`), event.summary ? thinking(String(event.summary), 'Summary') : null);
    }
    case 'CondensationRequest':
      return h('p', { class: 'divider' }, 'Condensation requested');
    case 'CondensationSummaryEvent':
      return h('div', { class: 'divider-block' }, h('p', { class: 'divider' }, 'Summary of earlier context'), thinking(String(event.summary ?? ''), 'Summary'));
    case 'ConversationStateUpdateEvent':
      return h('p', { class: 'system' }, event.key === 'execution_status' ? ['Status → ', badge(String(event.value))] : `State updated (${String(event.key ?? '')})`, meta(stored, rows));
    case 'PauseEvent':
      return h('p', { class: 'system' }, 'Paused by the user', meta(stored, rows));
    case 'InterruptEvent':
      return h('p', { class: 'system' }, 'Interrupted by the user', meta(stored, rows));
    case 'SystemPromptEvent': {
      const tools = (event.tools as { title?: string; kind?: string }[] | undefined) ?? [];
      return h(
        'details',
        { class: 'system-prompt' },
        h('summary', null, `System prompt · ${tools.length} tool${tools.length === 1 ? '' : 's'}`, meta(stored, rows, false)),
        h('div', { class: 'text' }, renderMarkdown(textOf([event.system_prompt]))),
        tools.length ? h('p', { class: 'chips' }, ...tools.map((tool) => h('span', { class: 'chip' }, tool.title ?? tool.kind ?? 'tool'))) : null,
      );
    }
    case 'TokenEvent':
      return h('p', { class: 'system' }, `Tokens: ${(event.prompt_token_ids as unknown[] | undefined)?.length ?? 0} prompt, ${(event.response_token_ids as unknown[] | undefined)?.length ?? 0} response`, meta(stored, rows));
    case 'LLMCompletionLogEvent':
      return h('p', { class: 'system' }, `LLM call ${String(event.model_name ?? '')}`, usageChip(rows.usageOfLogEvent(stored.seq)), meta(stored, rows));
    default:
      return h('div', { class: 'unknown' }, rawJson(`Unknown event ${String(event.kind)}`, event), meta(stored, rows));
  }
}

/**
 * An event stored under the `accept-unknown` policy: what the contract does not know is not
 * interpreted, only shown as its raw JSON, folded, as text (agent output is never HTML).
 */
function unrecognizedCard(stored: StoredEvent, unrecognized: NonNullable<StoredEvent['unrecognized']>, rows: ConversationRows): HTMLElement {
  const label = unrecognized.kind ? 'unrecognized kind' : `${unrecognized.properties.length} unknown propert${unrecognized.properties.length === 1 ? 'y' : 'ies'}`;
  return h(
    'details',
    { class: 'card unrecognized' },
    h('summary', null, h('span', { class: 'tool' }, String(stored.event.kind)), ' ', h('span', { class: 'badge', 'data-status': 'unrecognized' }, label), meta(stored, rows, false)),
    unrecognized.properties.length ? h('p', { class: 'chips' }, ...unrecognized.properties.map((path) => h('code', { class: 'chip' }, path))) : null,
    h('pre', { class: 'output', tabindex: 0 }, stringify(stored.event)),
  );
}

const RISKS = new Set(['LOW', 'MEDIUM', 'HIGH', 'UNKNOWN']);

/**
 * An action as its family draws it (file edit, terminal, …) with its results under it; the header
 * says how long it took (until its first result) and what its LLM response cost. An action class
 * no family knows is shown as folded raw JSON.
 */
function actionCard(stored: StoredEvent, results: StoredEvent[], rows: ConversationRows): HTMLElement {
  const event = stored.event as AnyEvent & Record<string, unknown>;
  const action = (event.action ?? {}) as Fields;
  const tool = String(event.tool_name ?? '');
  const family = familyOfAction(action, tool);
  const firstObservation = results.find((result) => result.event.kind === 'ObservationEvent');
  const observation = firstObservation ? ((field(firstObservation.event, 'observation') ?? {}) as Fields) : undefined;
  const parts = family?.action(action, observation);
  const risk = typeof event.security_risk === 'string' && RISKS.has(event.security_risk) && event.security_risk !== 'UNKNOWN' ? event.security_risk : null;
  const summary = typeof event.summary === 'string' && event.summary ? event.summary : (parts?.summary ?? String(action.kind ?? 'Action'));
  const took = results.length ? eventTime(results[0]!).ms - eventTime(stored).ms : undefined;
  const thought = textOf(event.thought);
  const isError = results.some((result) => result.event.kind === 'ObservationEvent' && failed((field(result.event, 'observation') ?? {}) as Fields));
  return h(
    'article',
    { class: `card action${isError ? ' failed' : ''}`, 'data-card': family?.name ?? 'raw', 'data-action': String(action.kind ?? '') },
    h(
      'header',
      null,
      h('span', { class: 'tool' }, tool || 'tool'),
      h('span', { class: 'summary' }, summary),
      risk ? h('span', { class: 'risk', 'data-risk': risk }, `${risk.toLowerCase()} risk`) : null,
      took !== undefined && Number.isFinite(took) && took > 0 ? h('span', { class: 'took', title: 'From the action to its first result' }, `took ${duration(took)}`) : null,
      usageChip(rows.usageOf(event.llm_response_id)),
      meta(stored, rows),
    ),
    thought ? h('div', { class: 'text thought' }, renderMarkdown(thought)) : null,
    reasoningOf(event),
    parts ? parts.body : rawJson(`Unknown action ${String(action.kind ?? '')} (tool ${tool || 'unnamed'})`, action),
    results.length ? results.map((stored) => result(stored, action)) : h('p', { class: 'hint waiting' }, 'No result yet'),
  );
}

/** An observation or rejection under its action, drawn by the observation's family. */
function result(stored: StoredEvent, action: Fields | undefined): HTMLElement {
  const event = stored.event as AnyEvent & Record<string, unknown>;
  if (event.kind === 'UserRejectObservation') {
    return h('div', { class: 'result rejected', 'data-card': 'rejection' }, h('p', null, h('strong', null, '⊘ Rejected'), ` by ${String(event.rejection_source ?? 'user')}: `, String(event.rejection_reason ?? '')));
  }
  const observation = (event.observation ?? {}) as Fields;
  const family = familyOfObservation(observation);
  const parts = family ? family.observation(observation, action) : [rawJson(`Unknown observation ${String(observation.kind ?? '')}`, observation)];
  return h('div', { class: `result${failed(observation) ? ' failed' : ''}`, 'data-card': family?.name ?? 'raw', 'data-observation': String(observation.kind ?? '') }, parts);
}

function errorCard(stored: StoredEvent, rows: ConversationRows, title: string, detail: string): HTMLElement {
  return h('article', { class: 'card error', 'data-card': 'error' }, h('header', null, h('span', { class: 'bad' }, '✕ '), h('span', { class: 'summary' }, title), meta(stored, rows)), h('pre', { class: 'output', tabindex: 0 }, detail));
}
