import type { EntityManager } from '@mikro-orm/postgresql';
import { sqlRows, sqlRun, type SqlRunner } from '../db/sql.ts';
import type { SpendGroupRow } from './mapper.ts';

/** The spend ledger's SQL: usages and charges written in the info's transaction, the owner's report. */

/** A usage as counted so far (`counted_micro_usd` as text: bigint). */
export interface UsageRow {
  usage_id: string;
  counted_micro_usd: string;
  counted_tokens_in: string;
  counted_tokens_out: string;
  counted_llm_calls: string;
  /** The `updated_at` of the newest info that reported the usage, in epoch milliseconds. */
  reported_ms: number | null;
}

/** A conversation's usages, locked until the transaction ends. */
export function lockedUsages(trx: SqlRunner, conversationId: string): Promise<UsageRow[]> {
  return sqlRows<UsageRow>(
    trx,
    `select usage_id, counted_micro_usd::text as counted_micro_usd, counted_tokens_in::text as counted_tokens_in,
       counted_tokens_out::text as counted_tokens_out, counted_llm_calls::text as counted_llm_calls,
       round(extract(epoch from reported_at) * 1000)::float8 as reported_ms
     from spend_usages where conversation_id = $1 for update`,
    [conversationId],
  );
}

/** Moves a usage's counters to `counted` and adds `charge` to what it charged. */
export async function upsertUsage(
  trx: SqlRunner,
  usage: {
    conversationId: string;
    usageId: string;
    modelName: string;
    counted: { cost: bigint; tokensIn: bigint; tokensOut: bigint; llmCalls: bigint };
    charge: bigint;
    reportedAt: string | null;
  },
): Promise<void> {
  const { counted } = usage;
  await sqlRun(
    trx,
    `insert into spend_usages as u (conversation_id, usage_id, model_name, counted_micro_usd, charged_micro_usd, reported_at,
       counted_tokens_in, counted_tokens_out, counted_llm_calls)
     values ($1, $2, $3, $4, $5, $6::timestamptz, $7, $8, $9)
     on conflict (conversation_id, usage_id) do update set
       model_name = excluded.model_name,
       counted_micro_usd = excluded.counted_micro_usd,
       charged_micro_usd = u.charged_micro_usd + excluded.charged_micro_usd,
       reported_at = greatest(u.reported_at, excluded.reported_at),
       counted_tokens_in = excluded.counted_tokens_in,
       counted_tokens_out = excluded.counted_tokens_out,
       counted_llm_calls = excluded.counted_llm_calls`,
    [
      usage.conversationId,
      usage.usageId,
      usage.modelName,
      counted.cost.toString(),
      usage.charge.toString(),
      usage.reportedAt,
      counted.tokensIn.toString(),
      counted.tokensOut.toString(),
      counted.llmCalls.toString(),
    ],
  );
}

/** What one post added to a model's usage in a conversation. */
export interface DailyUsageIncrease {
  modelName: string;
  cost: bigint;
  tokensIn: bigint;
  tokensOut: bigint;
  llmCalls: bigint;
}

/**
 * Adds the increases to today's (UTC) usage rows of the conversation: the day of `now()`, the
 * transaction's instant, which is also the `charged_at` of the entries it writes.
 */
export async function addDailyUsage(trx: SqlRunner, ownerId: string, conversationId: string, increases: readonly DailyUsageIncrease[]): Promise<void> {
  await sqlRun(
    trx,
    `insert into usage_daily as d (owner_id, day, conversation_id, model_name, cost_micro_usd, tokens_in, tokens_out, llm_calls)
     select $1, (now() at time zone 'UTC')::date, $2, model_name, cost, tokens_in, tokens_out, llm_calls
     from unnest($3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[]) as i (model_name, cost, tokens_in, tokens_out, llm_calls)
     on conflict (owner_id, day, conversation_id, model_name) do update set
       cost_micro_usd = d.cost_micro_usd + excluded.cost_micro_usd,
       tokens_in = d.tokens_in + excluded.tokens_in,
       tokens_out = d.tokens_out + excluded.tokens_out,
       llm_calls = d.llm_calls + excluded.llm_calls`,
    [
      ownerId,
      conversationId,
      increases.map((i) => i.modelName),
      increases.map((i) => i.cost.toString()),
      increases.map((i) => i.tokensIn.toString()),
      increases.map((i) => i.tokensOut.toString()),
      increases.map((i) => i.llmCalls.toString()),
    ],
  );
}

/** One ledger entry per charge. */
export async function insertEntries(
  trx: SqlRunner,
  ownerId: string,
  conversationId: string,
  charges: readonly { usageId: string; modelName: string; amount: bigint }[],
): Promise<void> {
  const values: unknown[] = [];
  const rows = charges.map(({ usageId, modelName, amount }) => {
    const at = values.push(ownerId, conversationId, usageId, modelName, amount.toString()) - 5;
    return `($${at + 1}, $${at + 2}, $${at + 3}, $${at + 4}, $${at + 5})`;
  });
  await sqlRun(trx, `insert into spend_entries (owner_id, conversation_id, usage_id, model_name, amount_micro_usd) values ${rows.join(', ')}`, values);
}

/** Adds `amount` to the owner's total (its row lock orders the owner's charges); returns the total and what the owner bought, as text. */
export async function addToTotal(trx: SqlRunner, ownerId: string, amount: bigint): Promise<{ spent: string; purchased: string }> {
  const [balance] = await sqlRows<{ spent: string; purchased: string }>(
    trx,
    `insert into spend_totals as t (owner_id, spent_micro_usd) values ($1, $2)
     on conflict (owner_id) do update set spent_micro_usd = t.spent_micro_usd + excluded.spent_micro_usd
     returning spent_micro_usd::text as spent,
       (select coalesce(sum(amount_usd), 0) from credit_ledger where user_id = $1)::text as purchased`,
    [ownerId, amount.toString()],
  );
  return balance!;
}

/** The `billing.balance_depleted` outbound message, stored with its cause (src/db/functions/webhook_enqueue.sql). */
export async function enqueueBalanceDepleted(trx: SqlRunner, ownerId: string, data: Record<string, unknown>): Promise<void> {
  await sqlRows(trx, `select webhook_enqueue($1::uuid, null, 'billing.balance_depleted', $2::jsonb)`, [ownerId, JSON.stringify(data)]);
}

/** The key and the order of each grouping; the key is what `count(distinct …)` counts too. */
const GROUPINGS = {
  conversation: { key: 'conversation_id::text', order: 'max(charged_at) desc, 1' },
  model: { key: 'model_name', order: 'sum(amount_micro_usd) desc, 1' },
  day: { key: "to_char(charged_at at time zone 'UTC', 'YYYY-MM-DD')", order: '1 desc' },
} as const;

export type SpendGroupKey = keyof typeof GROUPINGS;

/** The owner's entries in `[since, until)`: the condition and its values. */
function rangeOf(ownerId: string, since?: string, until?: string): { where: string; values: unknown[] } {
  const values: unknown[] = [ownerId];
  let where = 'owner_id = $1';
  if (since) where += ` and charged_at >= $${values.push(since)}`;
  if (until) where += ` and charged_at < $${values.push(until)}`;
  return { where, values };
}

/** The totals of a range: amount (text), entries, groups. */
export async function spendTotals(
  em: EntityManager,
  groupBy: SpendGroupKey,
  range: { ownerId: string; since?: string; until?: string },
): Promise<{ total: string; entries: number; groups: number }> {
  const { where, values } = rangeOf(range.ownerId, range.since, range.until);
  const [totals] = await sqlRows<{ total: string; entries: number; groups: number }>(
    em,
    `select coalesce(sum(amount_micro_usd), 0)::text as total, count(*)::int as entries, count(distinct ${GROUPINGS[groupBy].key})::int as groups
     from spend_entries where ${where}`,
    values,
  );
  return totals!;
}

/** One page of a range's groups, in the grouping's own order or by amount (largest first). */
export function spendGroups(
  em: EntityManager,
  groupBy: SpendGroupKey,
  range: { ownerId: string; since?: string; until?: string },
  page: { limit: number; offset: number; order: 'default' | 'amount' },
): Promise<SpendGroupRow[]> {
  const { where, values } = rangeOf(range.ownerId, range.since, range.until);
  const key = GROUPINGS[groupBy].key;
  const order = page.order === 'amount' ? 'sum(amount_micro_usd) desc, 1' : GROUPINGS[groupBy].order;
  return sqlRows<SpendGroupRow>(
    em,
    `select ${key} as key, sum(amount_micro_usd)::text as amount, count(*)::int as entries,
       min(charged_at) as first_charged_at, max(charged_at) as last_charged_at
     from spend_entries where ${where}
     group by 1 order by ${order} limit $${values.length + 1} offset $${values.length + 2}`,
    [...values, page.limit, page.offset],
  );
}

/** The stored title (JSON text) of each of these conversations that has one. */
export function conversationTitles(em: EntityManager, conversationIds: string[]): Promise<{ conversation_id: string; title: string | null }[]> {
  return sqlRows(em, 'select conversation_id, title::text as title from conversation_infos where conversation_id = any($1::uuid[])', [conversationIds]);
}
