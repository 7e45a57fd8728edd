import type { Schemas } from '../api.ts';

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
  firstSeq = Infinity;
  lastSeq = 0;

  /**
   * Turns stored events (in sequence order) into new rows; `updated` gets the keys of existing rows
   * that changed (an action that received its observation). Results whose action is already loaded
   * produce no row of their own.
   */
  add(events: StoredEvent[], updated: Set<string>, orphanRowsToRemove: Set<string>): EventRow[] {
    const rows: EventRow[] = [];
    for (const stored of events) {
      this.firstSeq = Math.min(this.firstSeq, stored.seq);
      this.lastSeq = Math.max(this.lastSeq, stored.seq);
      const event = stored.event;
      const id = field<string>(event, 'id');
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
          continue;
        }
      }
      const row: EventRow = { key: `e${id ?? stored.seq}`, type: 'event', stored, results: [] };
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
    return rows;
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
