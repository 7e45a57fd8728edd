import type { Fields } from './common.ts';

/**
 * One family of tools (file edits, terminal, …): which action and observation classes it draws, and
 * how. An action's card shows the family's `action` parts under its header and each observation's
 * parts under it; a class no family claims is shown as folded raw JSON.
 */
export interface CardFamily {
  /** `data-card` of the card (tests and styles select on it). */
  readonly name: string;
  /** Whether this family draws an action of class `kind` (or, for older SDKs, of tool `tool`). */
  handlesAction(kind: string, tool: string): boolean;
  handlesObservation(kind: string): boolean;
  /** The parts under the action's header; `observation` is its first result, when it has arrived. */
  action(action: Fields, observation: Fields | undefined): ActionParts;
  observation(observation: Fields, action: Fields | undefined): (Node | null)[];
}

export interface ActionParts {
  /** A one-line summary for the header, when the event has none of its own. */
  readonly summary?: string;
  readonly body: (Node | null)[];
}

/** A predicate over class names from a list (and, optionally, a prefix). */
export function oneOf(...names: string[]): (kind: string) => boolean {
  const set = new Set(names);
  return (kind) => set.has(kind);
}
