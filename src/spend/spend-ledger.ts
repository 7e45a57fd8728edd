import type { SqlRunner } from '../db/sql.ts';
import type { Logger } from '../logger.ts';
import { numberTextOf } from '../lossless-json.ts';
import * as queries from './queries.ts';
import { MICROS_PER_USD, microUsdNumberOf, microUsdOfDecimal, usdOf } from './money.ts';

/** What one LLM usage of a conversation has cost and used so far, as the agent-server reports it. */
export interface UsageCost {
  usageId: string;
  modelName: string;
  /** The usage's `accumulated_cost`, rounded to the micro-dollar. */
  cumulativeMicroUsd: bigint;
  /** `accumulated_token_usage.prompt_tokens`; undefined when not reported. */
  tokensIn: bigint | undefined;
  /** `accumulated_token_usage.completion_tokens`; undefined when not reported. */
  tokensOut: bigint | undefined;
  /** How many LLM calls (`token_usages`, one per call); undefined when the usage came as a snapshot. */
  llmCalls: bigint | undefined;
}

/** An organization's balance went below zero with this charge. */
export interface BalanceDepleted {
  orgId: string;
  conversationId: string;
  balanceMicroUsd: bigint;
}

/** What charging one conversation info did. */
export interface ChargeOutcome {
  chargedMicroUsd: bigint;
  depleted?: BalanceDepleted;
}

/** `\u0000` and lone surrogates, which a `text` column cannot hold. */
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** Labels are cut to this many characters: a key of a B-tree index cannot be kilobytes long. */
const MAX_LABEL_CHARACTERS = 255;

/**
 * A label (usage id, model name) as the ledger can hold it: unstorable characters become U+FFFD and
 * it is cut to `MAX_LABEL_CHARACTERS` code points. Real ones (`agent`, `anthropic/claude-…`) are short.
 */
function storableLabel(label: string): string {
  const storable = label.replace(UNSTORABLE, '\ufffd');
  return storable.length <= MAX_LABEL_CHARACTERS ? storable : Array.from(storable).slice(0, MAX_LABEL_CHARACTERS).join('');
}

/** A count as the SDK writes it (a non-negative integer), or undefined. */
function countOf(value: unknown): bigint | undefined {
  return Number.isSafeInteger(value) && (value as number) >= 0 ? BigInt(value as number) : undefined;
}

type ReportedUsage = { model_name?: string; accumulated_cost?: number; accumulated_token_usage?: { prompt_tokens?: number; completion_tokens?: number } | null; token_usages?: unknown[] };

/**
 * The cost, tokens and calls of each LLM usage in a conversation info (`stats.usage_to_metrics`), the
 * cost read from the JSON text as sent: a double never carries money here. The schema has checked each
 * cost is a number from 0 to 1,000,000. A usage without `accumulated_cost` is left out. `metrics`
 * (their sum) is not counted.
 */
export function usageCostsOf(info: { stats?: { usage_to_metrics?: Record<string, ReportedUsage> } }): UsageCost[] {
  const usages = info.stats?.usage_to_metrics ?? {};
  const costs: UsageCost[] = [];
  for (const [usageId, metrics] of Object.entries(usages)) {
    const text = numberTextOf(metrics, 'accumulated_cost');
    if (text === undefined) continue;
    const tokens = metrics.accumulated_token_usage;
    costs.push({
      usageId: storableLabel(usageId),
      modelName: storableLabel(metrics.model_name ?? 'unknown'),
      cumulativeMicroUsd: microUsdOfDecimal(text),
      tokensIn: countOf(tokens?.prompt_tokens),
      tokensOut: countOf(tokens?.completion_tokens),
      llmCalls: Array.isArray(metrics.token_usages) ? BigInt(metrics.token_usages.length) : undefined,
    });
  }
  return costs;
}

/** A cumulative counter moved to what a post reports: its new value and the increase counted. */
interface CounterMove {
  counted: bigint;
  increase: bigint;
}

/**
 * Where a counter goes: up to a higher report (the increase counted); to a lower one only in a newer
 * post (`restarted`: the runtime's counters started again; nothing counted); otherwise it stays.
 */
function moveCounter(counted: bigint, reported: bigint | undefined, restarted: boolean): CounterMove {
  if (reported === undefined) return { counted, increase: 0n };
  if (reported >= counted) return { counted: reported, increase: reported - counted };
  return restarted ? { counted: reported, increase: 0n } : { counted, increase: 0n };
}

/** One usage's change: its new counters and the increases, the cost's being the charge. */
interface UsageChange {
  usage: UsageCost;
  cost: CounterMove;
  tokensIn: CounterMove;
  tokensOut: CounterMove;
  llmCalls: CounterMove;
}

/**
 * Charges the increase of each usage's cumulative cost since the info that last moved it, inside
 * the caller's transaction, which holds the conversation's row lock: infos of one conversation are
 * charged one at a time, whichever instance receives them. Tokens and LLM calls are counted the same
 * way, and every increase is added to the day's usage (`usage_daily` and its rollups) in the same transaction.
 * Each charge is recorded as caused by `memberId` (the user whose key posted the info) and added to the
 * month's spend of the organization and the member, which may send budget alerts (`chargeBudget`).
 *
 * - An increase is charged once: `counted_micro_usd` moves up to the reported cost with the charge.
 * - A post older (`updated_at`) than the newest that reported the usage changes nothing.
 * - A decrease in a strictly newer post is a runtime that restarted its counters: nothing is
 *   charged, it is logged (once: the counter then counts from the new value), and increases from
 *   there are charged.
 * - A decrease that is not newer (the same instant, or no `updated_at` to tell) is a reordered
 *   post: nothing is charged and the counter stays where it is.
 */
export async function chargeConversationSpend(
  trx: SqlRunner,
  log: Logger,
  input: { conversationId: string; ownerId: string; memberId: string; reportedAt: string | null; usages: UsageCost[] },
): Promise<ChargeOutcome> {
  const { conversationId, ownerId, memberId, reportedAt, usages } = input;
  if (usages.length === 0) return { chargedMicroUsd: 0n };
  const rows = await queries.lockedUsages(trx, conversationId);
  const known = new Map(rows.map((row) => [row.usage_id, row]));
  const reported = reportedAt === null ? null : Date.parse(reportedAt);

  const changes: UsageChange[] = [];
  for (const usage of usages) {
    const row = known.get(usage.usageId);
    const last = row?.reported_ms ?? null;
    if (row && reported !== null && last !== null && reported < last) continue; // a late post: newer ones said more
    const restarted = row !== undefined && reported !== null && last !== null && reported > last;
    const change: UsageChange = {
      usage,
      cost: moveCounter(BigInt(row?.counted_micro_usd ?? 0), usage.cumulativeMicroUsd, restarted),
      tokensIn: moveCounter(BigInt(row?.counted_tokens_in ?? 0), usage.tokensIn, restarted),
      tokensOut: moveCounter(BigInt(row?.counted_tokens_out ?? 0), usage.tokensOut, restarted),
      llmCalls: moveCounter(BigInt(row?.counted_llm_calls ?? 0), usage.llmCalls, restarted),
    };
    if (row && restarted && usage.cumulativeMicroUsd < BigInt(row.counted_micro_usd)) {
      log.warn(
        { conversationId, usageId: usage.usageId, countedMicroUsd: row.counted_micro_usd, reportedMicroUsd: usage.cumulativeMicroUsd.toString() },
        'spend counter decreased (runtime restarted its counters): nothing charged, counting again from the new value',
      );
    }
    changes.push(change);
  }

  for (const { usage, cost, tokensIn, tokensOut, llmCalls } of changes) {
    await queries.upsertUsage(trx, {
      conversationId,
      usageId: usage.usageId,
      modelName: usage.modelName,
      counted: { cost: cost.counted, tokensIn: tokensIn.counted, tokensOut: tokensOut.counted, llmCalls: llmCalls.counted },
      charge: cost.increase,
      reportedAt,
    });
  }
  await addToDailyUsage(trx, ownerId, memberId, conversationId, changes);

  const charges = changes.filter((change) => change.cost.increase > 0n);
  if (charges.length === 0) return { chargedMicroUsd: 0n };
  const total = charges.reduce((sum, change) => sum + change.cost.increase, 0n);
  await queries.insertEntries(
    trx,
    ownerId,
    memberId,
    conversationId,
    charges.map(({ usage, cost }) => ({ usageId: usage.usageId, modelName: usage.modelName, amount: cost.increase })),
  );
  // The total's row lock orders this user's charges: exactly one of them sees the balance cross zero.
  const balance = await queries.addToTotal(trx, ownerId, total);
  const purchased = BigInt(balance.purchased) * MICROS_PER_USD;
  const spent = BigInt(balance.spent);
  const after = purchased - spent;
  const before = after + total;
  // The month's spend against the budget, and its alerts, in this transaction (docs/billing.md, "Budgets").
  await queries.chargeBudget(trx, ownerId, memberId, total);
  if (!(before >= 0n && after < 0n)) return { chargedMicroUsd: total };
  // The outbound webhook message, stored with its cause (docs/outbound-webhooks.md); a user-level
  // message, so no conversation filter applies.
  const data = {
    conversation_id: conversationId,
    balance_usd: usdOf(after),
    balance_micro_usd: microUsdNumberOf(after),
    purchased_micro_usd: microUsdNumberOf(purchased),
    spent_micro_usd: microUsdNumberOf(spent),
  };
  await queries.enqueueBalanceDepleted(trx, ownerId, data);
  return { chargedMicroUsd: total, depleted: { orgId: ownerId, conversationId, balanceMicroUsd: after } };
}

/** The increases of one post, summed per model (one row each: an upsert cannot touch a row twice), added to today's usage. */
async function addToDailyUsage(trx: SqlRunner, ownerId: string, memberId: string, conversationId: string, changes: UsageChange[]): Promise<void> {
  const byModel = new Map<string, queries.DailyUsageIncrease>();
  for (const { usage, cost, tokensIn, tokensOut, llmCalls } of changes) {
    if (cost.increase + tokensIn.increase + tokensOut.increase + llmCalls.increase === 0n) continue;
    const sum = byModel.get(usage.modelName) ?? { modelName: usage.modelName, cost: 0n, tokensIn: 0n, tokensOut: 0n, llmCalls: 0n };
    sum.cost += cost.increase;
    sum.tokensIn += tokensIn.increase;
    sum.tokensOut += tokensOut.increase;
    sum.llmCalls += llmCalls.increase;
    byModel.set(usage.modelName, sum);
  }
  if (byModel.size > 0) await queries.addDailyUsage(trx, ownerId, memberId, conversationId, [...byModel.values()]);
}
