import type { EntityManager } from '@mikro-orm/postgresql';
import { sqlRows } from '../db/sql.ts';

/** Usage's SQL: `usage_daily` (written with the spend ledger's charges, src/spend/queries.ts) read back per group. */

/** Sums of a group or of the range, as the database gives them (bigints as text). */
export interface UsageSums {
  cost: string;
  tokens_in: string;
  tokens_out: string;
  conversations: number;
  llm_calls: string;
}

export interface UsageGroupRow extends UsageSums {
  key: string;
}

/** The key of each grouping and the order of its rows. */
const GROUPINGS = {
  day: { key: "to_char(day, 'YYYY-MM-DD')", order: '1' },
  model: { key: 'model_name', order: 'sum(cost_micro_usd) desc, sum(tokens_in) + sum(tokens_out) desc, 1' },
  member: { key: 'owner_id::text', order: 'sum(cost_micro_usd) desc, sum(tokens_in) + sum(tokens_out) desc, 1' },
  conversation: { key: 'conversation_id::text', order: 'sum(cost_micro_usd) desc, sum(tokens_in) + sum(tokens_out) desc, 1' },
} as const;

export type UsageGrouping = keyof typeof GROUPINGS;

/** The owner's usage rows in the UTC days `[since, until)`. */
const RANGE = 'owner_id = $1 and day >= $2::date and day < $3::date';

/** The totals of the range and its number of groups: one statement, so both see the same rows. */
export function usageTotalsQuery(groupBy: UsageGrouping, range: { ownerId: string; since: string; until: string }): [string, unknown[]] {
  return [
    `select coalesce(sum(cost_micro_usd), 0)::text as cost, coalesce(sum(tokens_in), 0)::text as tokens_in,
       coalesce(sum(tokens_out), 0)::text as tokens_out, count(distinct conversation_id)::int as conversations,
       coalesce(sum(llm_calls), 0)::text as llm_calls, count(distinct ${GROUPINGS[groupBy].key})::int as groups
     from usage_daily where ${RANGE}`,
    [range.ownerId, range.since, range.until],
  ];
}

/** The range's groups in the grouping's order, at most `limit`. */
export function usageGroupsQuery(groupBy: UsageGrouping, range: { ownerId: string; since: string; until: string }, limit: number): [string, unknown[]] {
  const { key, order } = GROUPINGS[groupBy];
  // A conversation is one conversation: no distinct count to sort for.
  const conversations = groupBy === 'conversation' ? '1' : 'count(distinct conversation_id)::int';
  return [
    `select ${key} as key, sum(cost_micro_usd)::text as cost, sum(tokens_in)::text as tokens_in, sum(tokens_out)::text as tokens_out,
       ${conversations} as conversations, sum(llm_calls)::text as llm_calls
     from usage_daily where ${RANGE}
     group by 1 order by ${order} limit $4`,
    [range.ownerId, range.since, range.until, limit],
  ];
}

export async function usageTotals(em: EntityManager, groupBy: UsageGrouping, range: { ownerId: string; since: string; until: string }): Promise<UsageSums & { groups: number }> {
  const [text, values] = usageTotalsQuery(groupBy, range);
  const [totals] = await sqlRows<UsageSums & { groups: number }>(em, text, values);
  return totals!;
}

export function usageGroups(em: EntityManager, groupBy: UsageGrouping, range: { ownerId: string; since: string; until: string }, limit: number): Promise<UsageGroupRow[]> {
  const [text, values] = usageGroupsQuery(groupBy, range, limit);
  return sqlRows<UsageGroupRow>(em, text, values);
}

/** The owner's rename and the agent-server's title (JSON text) of each of these conversations that still exists. */
export function conversationTitles(em: EntityManager, conversationIds: string[]): Promise<{ id: string; renamed_title: string | null; info_title: string | null }[]> {
  return sqlRows(
    em,
    `select c.id::text as id, c.renamed_title, i.title::text as info_title
     from conversations c left join conversation_infos i on i.conversation_id = c.id where c.id = any($1::uuid[])`,
    [conversationIds],
  );
}

/** The e-mail of each of these users. */
export function userEmails(em: EntityManager, userIds: string[]): Promise<{ id: string; email: string }[]> {
  return sqlRows(em, 'select id::text as id, email from users where id = any($1::uuid[])', [userIds]);
}
