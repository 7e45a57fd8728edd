import type { components } from '../../generated/openapi.ts';

type MetricsSnapshot = components['schemas']['MetricsSnapshot'];
type TokenUsage = components['schemas']['TokenUsage'];

/** The counts that add up across usages (SDK `TokenUsage.__add__`). */
const ADDED_COUNTS = ['prompt_tokens', 'completion_tokens', 'cache_read_tokens', 'cache_write_tokens', 'reasoning_tokens'] as const;
const INTEGER_FIELDS = [...ADDED_COUNTS, 'context_window', 'per_turn_token'] as const;

const isRecord = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);
const isCount = (value: unknown): value is number => Number.isSafeInteger(value);
const isCost = (value: unknown): value is number => typeof value === 'number' && value >= 0 && value <= 1_000_000;

/** The fields of a `TokenUsage` that `value` holds with their types, or null when it is not one. */
function tokenUsageOf(value: unknown): TokenUsage | null {
  if (!isRecord(value)) return null;
  const usage: TokenUsage = {};
  if (typeof value.model === 'string') usage.model = value.model;
  for (const field of INTEGER_FIELDS) if (isCount(value[field])) usage[field] = value[field];
  if (typeof value.response_id === 'string') usage.response_id = value.response_id;
  return usage;
}

function addTokenUsage(total: TokenUsage, next: TokenUsage): TokenUsage {
  const sum: TokenUsage = { ...total };
  for (const count of ADDED_COUNTS) if (total[count] !== undefined || next[count] !== undefined) sum[count] = (total[count] ?? 0) + (next[count] ?? 0);
  if (total.context_window !== undefined || next.context_window !== undefined) sum.context_window = Math.max(total.context_window ?? 0, next.context_window ?? 0);
  if (next.per_turn_token !== undefined) sum.per_turn_token = next.per_turn_token;
  return sum;
}

/**
 * A conversation's metrics from its per-LLM `stats.usage_to_metrics`, as the OpenHands app derives
 * them when the agent-server sends `metrics: null` (its `getCombinedMetrics`, after the SDK's
 * `ConversationStats.get_combined_metrics`): costs and token counts summed over the usages in
 * order, the first budget set, the largest context window, the latest turn's tokens; `model_name`
 * when every usage names the same model. Null when there are no usages, or when `stats` (from an
 * event, where nothing checked it) is not shaped as the SDK's `ConversationStats`.
 */
export function combinedMetricsOf(stats: unknown): MetricsSnapshot | null {
  if (!isRecord(stats) || !isRecord(stats.usage_to_metrics)) return null;
  const usages = Object.values(stats.usage_to_metrics);
  if (usages.length === 0 || !usages.every((usage) => isRecord(usage) && (usage.accumulated_cost === undefined || isCost(usage.accumulated_cost)))) return null;
  const models = new Set(usages.map((usage) => (usage as Record<string, unknown>).model_name));
  const [only] = models;
  let accumulatedCost = 0;
  let maxBudget: number | null = null;
  let tokens: TokenUsage | null = null;
  for (const usage of usages as Record<string, unknown>[]) {
    accumulatedCost += (usage.accumulated_cost as number | undefined) ?? 0;
    if (maxBudget === null && typeof usage.max_budget_per_task === 'number') maxBudget = usage.max_budget_per_task;
    const usageTokens = tokenUsageOf(usage.accumulated_token_usage);
    if (usageTokens) tokens = tokens === null ? usageTokens : addTokenUsage(tokens, usageTokens);
  }
  return {
    ...(models.size === 1 && typeof only === 'string' ? { model_name: only } : {}),
    accumulated_cost: accumulatedCost,
    max_budget_per_task: maxBudget,
    accumulated_token_usage: tokens,
  };
}

/** The `stats` a `ConversationStateUpdateEvent` carries: its value for `key: "stats"`, `value.stats` for `key: "full_state"`. */
export function statsOfStateUpdate(event: { kind: string; key?: string; value?: unknown }): unknown {
  if (event.kind !== 'ConversationStateUpdateEvent') return undefined;
  if (event.key === 'stats') return event.value;
  if (event.key === 'full_state' && isRecord(event.value)) return event.value.stats;
  return undefined;
}
