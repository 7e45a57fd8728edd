import type { components } from '../../generated/openapi.ts';
import { parseJson, stringifyJson } from '../lossless-json.ts';
import { holdsSecret } from '../secret-keys.ts';

type EventKind = components['schemas']['EventKind'];

/**
 * What a share link shows and hides (docs/sharing.md says why). Every kind of the spec is in exactly
 * one of the two lists (test/api/sharing.test.ts checks it against the spec), so a kind added later is
 * shown only once someone has decided it may be.
 */
export const SHOWN_KINDS: ReadonlySet<string> = new Set<EventKind>([
  'MessageEvent',
  'ActionEvent',
  'ObservationEvent',
  'UserRejectObservation',
  'AgentErrorEvent',
  'ACPToolCallEvent',
  'HookExecutionEvent',
  'Condensation',
  'CondensationRequest',
  'CondensationSummaryEvent',
  'ServerErrorEvent',
  'ConversationErrorEvent',
  'PauseEvent',
  'InterruptEvent',
  'SecurityAnalysisEvent',
  'AskUserRequestEvent',
  'AskUserResponseEvent',
]);

/** Internal machinery, raw LLM traffic and the agent's instructions: never through a share link. */
export const HIDDEN_KINDS: ReadonlySet<string> = new Set<EventKind>([
  'ConversationStateUpdateEvent',
  'LLMCompletionLogEvent',
  'TokenEvent',
  'SystemPromptEvent',
  'StreamingDeltaEvent',
]);

/**
 * A stored event's text as a share link shows it: at any depth, keys the secret stripping removes
 * (`holdsSecret`, as for stored conversation infos) are dropped and every `encrypted_content` is null.
 * Untouched events go out as the very text stored; changed ones are written by `stringifyJson`, so
 * `\u0000`, lone surrogates and exact numbers survive.
 */
export function redactSharedPayload(payload: string): string {
  const event = parseJson(payload);
  return redact(event) ? stringifyJson(event) : payload;
}

/** Redacts `value` in place; true when it changed anything. */
function redact(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false;
  let changed = false;
  if (Array.isArray(value)) {
    for (const item of value) changed = redact(item) || changed;
    return changed;
  }
  const record = value as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    const item = record[key];
    if (key === 'encrypted_content') {
      if (item !== null) {
        record[key] = null;
        changed = true;
      }
    } else if (holdsSecret(key, item)) {
      delete record[key];
      changed = true;
    } else {
      changed = redact(item) || changed;
    }
  }
  return changed;
}
