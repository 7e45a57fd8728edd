import type { components } from '../../generated/openapi.ts';

type ValidationError = components['schemas']['ValidationError'];

/** Longest `detail` the ledger keeps (the error in short; the full list is in the 422 itself). */
export const MAX_DETAIL_CHARS = 1000;

/** Problems named in `detail` before "(and N more)". */
const DETAIL_PROBLEMS = 5;

/** Why a batch was refused, as the ledger, the log and the metrics say it (never a payload). */
export interface RefusalReason {
  status: 413 | 422;
  /** A short, bounded label: `body_too_large`, `batch_too_large`, or the first 422 error's `type`. */
  reason: string;
  /** The error in short: `loc: msg` per problem, at most `MAX_DETAIL_CHARS`. */
  detail: string;
}

/** The reason of a 413, by its message (see `readOperationBody`). */
export const BATCH_TOO_LARGE = 'batch_too_large';
export const BODY_TOO_LARGE = 'body_too_large';

/** The refusal an error body (`{detail}`) of status 413 or 422 stands for. */
export function refusalOf(status: 413 | 422, detail: unknown, reason413: string = BODY_TOO_LARGE): RefusalReason {
  if (status === 413 || !Array.isArray(detail)) {
    return { status, reason: status === 413 ? reason413 : 'value_error', detail: bounded(String(detail)) };
  }
  const problems = detail as ValidationError[];
  const named = problems.slice(0, DETAIL_PROBLEMS).map((problem) => `${problem.loc.join('.')}: ${problem.msg}`);
  const more = problems.length > DETAIL_PROBLEMS ? ` (and ${problems.length - DETAIL_PROBLEMS} more)` : '';
  return { status, reason: problems[0]?.type ?? 'value_error', detail: bounded(named.join('; ') + more) };
}

function bounded(text: string): string {
  return text.length <= MAX_DETAIL_CHARS ? text : `${text.slice(0, MAX_DETAIL_CHARS - 1)}…`;
}

/** Most event ids a refusal keeps to tell when it is resolved (Migration20261127190000_refusal_event_ids). */
export const MAX_KEPT_EVENT_IDS = 1000;

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The ids of the events a refused body would store, its first `MAX_KEPT_EVENT_IDS` distinct ones
 * (`StreamingDeltaEvent`s are never stored); null when it is not a JSON array of objects each with a
 * string id, or stores nothing: such a refusal is never resolved by its events arriving.
 */
export function refusedEventIds(body: Buffer | undefined): string[] | null {
  let batch: unknown;
  try {
    batch = body === undefined ? undefined : JSON.parse(strictUtf8.decode(body));
  } catch {
    return null;
  }
  if (!Array.isArray(batch)) return null;
  const ids = new Set<string>();
  for (const event of batch as unknown[]) {
    if (typeof event !== 'object' || event === null || Array.isArray(event)) return null;
    const { kind, id } = event as { kind?: unknown; id?: unknown };
    if (kind === 'StreamingDeltaEvent') continue;
    if (typeof id !== 'string') return null;
    if (ids.size < MAX_KEPT_EVENT_IDS) ids.add(id);
  }
  return ids.size === 0 ? null : [...ids];
}
