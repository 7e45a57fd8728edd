import type { StoredEvent } from './rows.ts';

/**
 * When an event happened, and what an LLM response cost. The agent stamps each event (`timestamp`,
 * the SDK's `datetime.now().isoformat()`, without a zone: read as UTC); when it is missing or not a
 * date, the time the server received the event stands in, and the tooltip says so.
 */

export interface EventTime {
  readonly ms: number;
  readonly iso: string;
  readonly source: 'agent' | 'received';
}

const ZONE = /(Z|[+-]\d\d:?\d\d)$/i;

export function eventTime(stored: StoredEvent): EventTime {
  const stamp = (stored.event as unknown as { timestamp?: unknown }).timestamp;
  if (typeof stamp === 'string' && /^\d{4}-\d\d-\d\dT\d\d:\d\d/.test(stamp)) {
    const ms = Date.parse(ZONE.test(stamp) ? stamp : `${stamp}Z`);
    if (Number.isFinite(ms)) return { ms, iso: new Date(ms).toISOString(), source: 'agent' };
  }
  const ms = Date.parse(stored.received_at);
  return { ms, iso: stored.received_at, source: 'received' };
}

/** Tokens, cost and latency of one LLM response, from an `LLMCompletionLogEvent`'s `log_data`. */
export interface ResponseUsage {
  readonly responseId: string;
  readonly promptTokens?: number;
  readonly completionTokens?: number;
  readonly costUsd?: number;
  readonly latencyMs?: number;
}

const number = (value: unknown): number | undefined => (typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : undefined);

export function usageOfLog(logData: unknown): ResponseUsage | undefined {
  if (typeof logData !== 'string' || logData.length > 5_000_000) return undefined;
  let log: Record<string, unknown>;
  try {
    log = JSON.parse(logData) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  if (!log || typeof log !== 'object') return undefined;
  const response = (log.response ?? {}) as Record<string, unknown>;
  const usage = (response.usage ?? log.usage ?? {}) as Record<string, unknown>;
  const responseId = typeof response.id === 'string' ? response.id : undefined;
  if (!responseId) return undefined;
  const latency = number(log.latency_sec);
  return {
    responseId,
    promptTokens: number(usage.prompt_tokens) ?? number(usage.input_tokens),
    completionTokens: number(usage.completion_tokens) ?? number(usage.output_tokens),
    costUsd: number(log.cost),
    latencyMs: latency === undefined ? undefined : latency * 1000,
  };
}
