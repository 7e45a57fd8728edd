import type { Schemas } from '../api.ts';
import { eventTime, usageOfLog, type ResponseUsage } from './timing.ts';

/**
 * The conversation as rows: one row per event the reader looks at, except that an action's
 * observations (and rejections) go into the action's row, under its card. Events sharing a
 * `parent_id` are branches; each row knows which branch it is.
 */

export type StoredEvent = Schemas['StoredEvent'];
export type AnyEvent = StoredEvent['event'];

export interface EventRow {
  readonly key: string;
  readonly type: 'event';
  readonly stored: StoredEvent;
  /** Observation-like events whose `action_id` is this row's event. */
  readonly results: StoredEvent[];
}

export interface PendingRow {
  readonly key: 'pending';
  readonly type: 'pending';
  content: string;
  reasoning: string;
}

export interface GapRow {
  readonly key: 'older';
  readonly type: 'older';
  state: 'more' | 'loading' | 'start' | 'error';
}

export type Row = EventRow | PendingRow | GapRow;

/** A landmark of the outline: a message, an error or a file edit. */
export interface OutlineEntry {
  readonly seq: number;
  readonly key: string;
  readonly type: 'message' | 'error' | 'edit';
  readonly label: string;
}

const ERROR_KINDS = new Set(['AgentErrorEvent', 'ConversationErrorEvent', 'ServerErrorEvent']);
const EDIT_ACTIONS = new Set(['FileEditorAction', 'StrReplaceEditorAction', 'PlanningFileEditorAction', 'EditAction', 'WriteFileAction', 'ApplyPatchAction']);

/** Kinds attached under the action they answer (by `action_id`). */
const RESULT_KINDS = new Set(['ObservationEvent', 'UserRejectObservation']);

export function field<T = unknown>(event: AnyEvent, name: string): T | undefined {
  return (event as unknown as Record<string, unknown>)[name] as T | undefined;
}

/** Keeps the loaded events as rows, and the indexes needed to attach results and count branches. */
export class ConversationRows {
  /** Row of each action event, by event id. */
  private readonly actions = new Map<string, EventRow>();
  /** Results loaded before their action (when paging back), by action id. */
  private readonly orphans = new Map<string, EventRow[]>();
  /** Event ids by parent id. */
  private readonly children = new Map<string, Set<string>>();
  /** Each loaded event's time (ms), by sequence number: durations and idle gaps. */
  private readonly times = new Map<number, number>();
  /** The row showing each sequence number (an observation's is its action's row). */
  private readonly keyBySeq = new Map<number, string>();
  /** Tokens and cost by LLM response id, and the rows that show each response. */
  private readonly usage = new Map<string, ResponseUsage>();
  /** The usage each completion log carries, by the log's sequence number. */
  private readonly logUsage = new Map<number, ResponseUsage>();
  private readonly responseRows = new Map<string, Set<string>>();
  /** Messages, errors and file edits, in sequence order. */
  readonly outline: OutlineEntry[] = [];
  firstSeq = Infinity;
  lastSeq = 0;

  /** `eventHref`: where an event's permalink leads (the shared page links within itself). */
  constructor(
    readonly conversationId: string,
    readonly eventHref: (seq: number) => string = (seq) => `#/conversations/${encodeURIComponent(conversationId)}/events/${seq}`,
  ) {}

  /**
   * Turns stored events (in sequence order) into new rows; `updated` gets the keys of existing rows
   * that changed (an action that received its observation). Results whose action is already loaded
   * produce no row of their own.
   */
  add(events: StoredEvent[], updated: Set<string>, orphanRowsToRemove: Set<string>): EventRow[] {
    const rows: EventRow[] = [];
    const nextLoaded = events.length ? this.keyBySeq.get(events[events.length - 1]!.seq + 1) : undefined;
    if (nextLoaded) updated.add(nextLoaded); // its idle gap can now be measured
    const landmarks: OutlineEntry[] = [];
    for (const stored of events) {
      this.firstSeq = Math.min(this.firstSeq, stored.seq);
      this.lastSeq = Math.max(this.lastSeq, stored.seq);
      this.times.set(stored.seq, eventTime(stored).ms);
      const event = stored.event;
      const id = field<string>(event, 'id');
      this.noteUsage(stored, updated);
      const parent = field<string | null>(event, 'parent_id');
      if (parent && id) {
        const siblings = this.children.get(parent) ?? new Set<string>();
        siblings.add(id);
        this.children.set(parent, siblings);
        if (siblings.size > 1) for (const sibling of siblings) updated.add(`e${sibling}`);
      }
      if (RESULT_KINDS.has(event.kind)) {
        const actionId = field<string>(event, 'action_id');
        const action = actionId ? this.actions.get(actionId) : undefined;
        if (action) {
          action.results.push(stored);
          action.results.sort((a, b) => a.seq - b.seq);
          updated.add(action.key);
          this.keyBySeq.set(stored.seq, action.key);
          continue;
        }
      }
      const row: EventRow = { key: `e${id ?? stored.seq}`, type: 'event', stored, results: [] };
      this.keyBySeq.set(stored.seq, row.key);
      const landmark = landmarkOf(row);
      if (landmark) landmarks.push(landmark);
      if (event.kind === 'ActionEvent' && id) {
        this.actions.set(id, row);
        // Results of this action loaded earlier (they came in a newer page) move under it.
        for (const orphan of this.orphans.get(id) ?? []) {
          row.results.push(orphan.stored);
          orphanRowsToRemove.add(orphan.key);
        }
        this.orphans.delete(id);
      } else if (RESULT_KINDS.has(event.kind)) {
        const actionId = field<string>(event, 'action_id');
        if (actionId) this.orphans.set(actionId, [...(this.orphans.get(actionId) ?? []), row]);
      }
      rows.push(row);
    }
    if (landmarks.length) {
      this.outline.push(...landmarks);
      this.outline.sort((a, b) => a.seq - b.seq);
    }
    return rows;
  }

  /** The row that shows event `seq`, when it is loaded. */
  keyOf(seq: number): string | undefined {
    return this.keyBySeq.get(seq);
  }

  /** The time of event `seq` (ms), when it is loaded. */
  timeOf(seq: number): number | undefined {
    return this.times.get(seq);
  }

  /** Milliseconds between the previous event and event `seq`, when both are loaded. */
  gapBefore(seq: number): number | undefined {
    const before = this.times.get(seq - 1);
    const at = this.times.get(seq);
    return before === undefined || at === undefined ? undefined : at - before;
  }

  usageOf(responseId: unknown): ResponseUsage | undefined {
    return typeof responseId === 'string' ? this.usage.get(responseId) : undefined;
  }

  /** What the completion log `seq` says its LLM call used. */
  usageOfLogEvent(seq: number): ResponseUsage | undefined {
    return this.logUsage.get(seq);
  }

  /** Remembers which rows show a response, and its usage when a completion log carries it. */
  private noteUsage(stored: StoredEvent, updated: Set<string>): void {
    const event = stored.event;
    if (event.kind === 'LLMCompletionLogEvent') {
      const usage = usageOfLog(field(event, 'log_data'));
      if (!usage) return;
      this.usage.set(usage.responseId, usage);
      this.logUsage.set(stored.seq, usage);
      for (const key of this.responseRows.get(usage.responseId) ?? []) updated.add(key);
      return;
    }
    const responseId = field<string | null>(event, 'llm_response_id');
    const id = field<string>(event, 'id');
    if (!responseId) return;
    const keys = this.responseRows.get(responseId) ?? new Set<string>();
    keys.add(`e${id ?? stored.seq}`);
    this.responseRows.set(responseId, keys);
  }

  /** "Branch 2 of 3" for an event with siblings, else undefined. */
  branchOf(event: AnyEvent): { index: number; total: number; parent: string } | undefined {
    const parent = field<string | null>(event, 'parent_id');
    const id = field<string>(event, 'id');
    if (!parent || !id) return undefined;
    const siblings = [...(this.children.get(parent) ?? [])];
    if (siblings.length < 2) return undefined;
    return { index: siblings.indexOf(id) + 1, total: siblings.length, parent };
  }
}

/** A message's Markdown as one line of plain words for the outline (`**list**` reads "list"). */
function plainLabel(markdown: string): string {
  return markdown
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/^\s{0,3}(?:#{1,6}\s+|>\s?|[-*+]\s+|\d+[.)]\s+)/gm, '')
    .replace(/(\*\*|__|~~|`+)/g, '')
    .replace(/\s+/g, ' ')
    .trim();
}

function landmarkOf(row: EventRow): OutlineEntry | undefined {
  const event = row.stored.event as unknown as Record<string, unknown>;
  const base = { seq: row.stored.seq, key: row.key };
  if (event.kind === 'MessageEvent') {
    const content = ((event.llm_message as { content?: { type?: string; text?: string }[] } | undefined)?.content ?? []).find((block) => block.type === 'text')?.text ?? '';
    return { ...base, type: 'message', label: `${event.source === 'user' ? 'User' : 'Agent'}: ${plainLabel(content).slice(0, 80)}` };
  }
  if (ERROR_KINDS.has(String(event.kind))) return { ...base, type: 'error', label: String(event.error ?? event.code ?? event.kind).slice(0, 80) };
  const action = event.action as { kind?: string; path?: string; file_path?: string; patch?: string } | undefined;
  if (event.kind === 'ActionEvent' && action && (EDIT_ACTIONS.has(String(action.kind)) || event.tool_name === 'str_replace_editor') && (action as { command?: string }).command !== 'view') {
    const patched = typeof action.patch === 'string' ? /^\*\*\* (?:Update|Add|Delete) File: (.+)$/m.exec(action.patch)?.[1] : undefined;
    return { ...base, type: 'edit', label: action.path ?? action.file_path ?? patched ?? String(action.kind) };
  }
  return undefined;
}
