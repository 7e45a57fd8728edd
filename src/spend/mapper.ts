import type { components } from '../../generated/openapi.ts';
import { microUsdNumberOf, usdOf } from './money.ts';

type SpendReport = components['schemas']['SpendReport'];
type SpendRow = components['schemas']['SpendRow'];

/** One group of charges as the database sums it; `key` is the conversation id, model name, day or member id ('' for none). */
export interface SpendGroupRow {
  key: string;
  amount: string;
  entries: number;
  first_charged_at: Date;
  last_charged_at: Date;
}

/** An amount in micro-dollars as the API gives money: dollars, and the exact micro-dollars. */
function money(micros: bigint): { usd: number; micro: number } {
  return { usd: usdOf(micros), micro: microUsdNumberOf(micros) };
}

/** What names a group for people: a conversation's title, a member's e-mail. */
export type SpendLabels = Map<string, string | null>;

function toSpendRow(groupBy: SpendReport['group_by'], row: SpendGroupRow, labels: SpendLabels): SpendRow {
  const amount = money(BigInt(row.amount));
  return {
    conversation_id: groupBy === 'conversation' ? row.key : null,
    title: groupBy === 'conversation' ? (labels.get(row.key) ?? null) : null,
    model_name: groupBy === 'model' ? row.key : null,
    day: groupBy === 'day' ? row.key : null,
    member_id: groupBy === 'member' && row.key !== '' ? row.key : null,
    email: groupBy === 'member' ? (labels.get(row.key) ?? null) : null,
    amount_usd: amount.usd,
    amount_micro_usd: amount.micro,
    entry_count: row.entries,
    first_charged_at: new Date(row.first_charged_at).toISOString(),
    last_charged_at: new Date(row.last_charged_at).toISOString(),
  };
}

/** The page of groups with the totals of the whole range. */
export function toSpendReport(
  groupBy: SpendReport['group_by'],
  range: { since: string | null; until: string | null },
  totals: { total: string; entries: number; groups: number },
  rows: SpendGroupRow[],
  labels: SpendLabels,
  page: { limit: number; offset: number },
): SpendReport {
  const total = money(BigInt(totals.total));
  const nextOffset = page.offset + rows.length;
  return {
    group_by: groupBy,
    since: range.since,
    until: range.until,
    total_usd: total.usd,
    total_micro_usd: total.micro,
    entry_count: totals.entries,
    group_count: totals.groups,
    items: rows.map((row) => toSpendRow(groupBy, row, labels)),
    limit: page.limit,
    offset: page.offset,
    next_offset: rows.length > 0 && nextOffset < totals.groups ? nextOffset : null,
  };
}

/** Bought, spent and the balance, as `getCredits` shows them. */
export function toCreditAmounts(purchasedMicroUsd: bigint, spentMicroUsd: bigint) {
  const purchased = money(purchasedMicroUsd);
  const spent = money(spentMicroUsd);
  const balanceMicroUsd = purchasedMicroUsd - spentMicroUsd;
  const balance = money(balanceMicroUsd);
  return {
    purchased_usd: purchased.usd,
    purchased_micro_usd: purchased.micro,
    spent_usd: spent.usd,
    spent_micro_usd: spent.micro,
    balance_usd: balance.usd,
    balance_micro_usd: balance.micro,
    overdrawn: balanceMicroUsd < 0n,
  };
}
