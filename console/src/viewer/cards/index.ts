import { browserCards } from './browser.ts';
import type { Fields } from './common.ts';
import type { CardFamily } from './family.ts';
import { fileEditCards } from './file-edit.ts';
import { finishCards, thinkCards } from './notes.ts';
import { taskTrackerCards } from './task-tracker.ts';
import { terminalCards } from './terminal.ts';
import { toolCallCards } from './tool-call.ts';

/** Every family of action cards, in the order they are asked (the first that claims a class draws it). */
const FAMILIES: readonly CardFamily[] = [fileEditCards, terminalCards, thinkCards, finishCards, taskTrackerCards, browserCards, toolCallCards];

/** The family that draws this action (by class, else by tool name), or undefined (raw JSON). */
export function familyOfAction(action: Fields, toolName: string): CardFamily | undefined {
  const kind = String(action.kind ?? '');
  return FAMILIES.find((family) => family.handlesAction(kind, toolName));
}

/** The family that draws this observation, or undefined (raw JSON). */
export function familyOfObservation(observation: Fields): CardFamily | undefined {
  const kind = String(observation.kind ?? '');
  return FAMILIES.find((family) => family.handlesObservation(kind));
}

export type { CardFamily } from './family.ts';
