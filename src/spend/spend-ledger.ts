import type { SqlRunner } from '../db/sql.ts';
import type { Logger } from '../logger.ts';
import { numberTextOf } from '../lossless-json.ts';
import * as queries from './queries.ts';
import { MICROS_PER_USD, microUsdNumberOf, microUsdOfDecimal, usdOf } from './money.ts';

/** What one LLM usage of a conversation has cost so far, as the agent-server reports it. */
export interface UsageCost {
  usageId: string;
  modelName: string;
  /** The usage's `accumulated_cost`, rounded to the micro-dollar. */
  cumulativeMicroUsd: bigint;
}

/** A user's balance went below zero with this charge. */
export interface BalanceDepleted {
  userId: string;
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

/**
 * The cost of each LLM usage in a conversation info (`stats.usage_to_metrics`), read from the JSON
 * text as sent: a double never carries money here. The schema has checked each is a number from 0 to
 * 1,000,000. A usage without `accumulated_cost` is left out. `metrics` (their sum) is not charged.
 */
export function usageCostsOf(info: { stats?: { usage_to_metrics?: Record<string, { model_name?: string; accumulated_cost?: number }> } }): UsageCost[] {
  const usages = info.stats?.usage_to_metrics ?? {};
  const costs: UsageCost[] = [];
  for (const [usageId, metrics] of Object.entries(usages)) {
    const text = numberTextOf(metrics, 'accumulated_cost');
    if (text === undefined) continue;
    costs.push({ usageId: storableLabel(usageId), modelName: storableLabel(metrics.model_name ?? 'unknown'), cumulativeMicroUsd: microUsdOfDecimal(text) });
  }
  return costs;
}

/** One usage's change: its new state and the charge, if any. */
interface UsageChange {
  usage: UsageCost;
  counted: bigint;
  charge: bigint;
}

/**
 * Charges the increase of each usage's cumulative cost since the info that last moved it, inside
 * the caller's transaction, which holds the conversation's row lock: infos of one conversation are
 * charged one at a time, whichever instance receives them.
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
  input: { conversationId: string; ownerId: string; reportedAt: string | null; usages: UsageCost[] },
): Promise<ChargeOutcome> {
  const { conversationId, ownerId, reportedAt, usages } = input;
  if (usages.length === 0) return { chargedMicroUsd: 0n };
  const rows = await queries.lockedUsages(trx, conversationId);
  const known = new Map(rows.map((row) => [row.usage_id, row]));
  const reported = reportedAt === null ? null : Date.parse(reportedAt);

  const changes: UsageChange[] = [];
  for (const usage of usages) {
    const row = known.get(usage.usageId);
    const cost = usage.cumulativeMicroUsd;
    if (!row) {
      changes.push({ usage, counted: cost, charge: cost });
      continue;
    }
    const counted = BigInt(row.counted_micro_usd);
    const last = row.reported_ms;
    if (reported !== null && last !== null && reported < last) continue; // a late post: newer ones said more
    if (cost >= counted) {
      changes.push({ usage, counted: cost, charge: cost - counted });
    } else if (reported !== null && last !== null && reported > last) {
      log.warn(
        { conversationId, usageId: usage.usageId, countedMicroUsd: counted.toString(), reportedMicroUsd: cost.toString() },
        'spend counter decreased (runtime restarted its counters): nothing charged, counting again from the new value',
      );
      changes.push({ usage, counted: cost, charge: 0n });
    } else {
      log.debug({ conversationId, usageId: usage.usageId }, 'spend counter lower in a post of the same instant: ignored');
    }
  }

  for (const { usage, counted, charge } of changes) {
    await queries.upsertUsage(trx, { conversationId, usageId: usage.usageId, modelName: usage.modelName, counted, charge, reportedAt });
  }

  const charges = changes.filter((change) => change.charge > 0n);
  if (charges.length === 0) return { chargedMicroUsd: 0n };
  const total = charges.reduce((sum, change) => sum + change.charge, 0n);
  await queries.insertEntries(
    trx,
    ownerId,
    conversationId,
    charges.map(({ usage, charge }) => ({ usageId: usage.usageId, modelName: usage.modelName, amount: charge })),
  );
  // The total's row lock orders this user's charges: exactly one of them sees the balance cross zero.
  const balance = await queries.addToTotal(trx, ownerId, total);
  const purchased = BigInt(balance.purchased) * MICROS_PER_USD;
  const spent = BigInt(balance.spent);
  const after = purchased - spent;
  const before = after + total;
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
  return { chargedMicroUsd: total, depleted: { userId: ownerId, conversationId, balanceMicroUsd: after } };
}
