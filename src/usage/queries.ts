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

/** Each grouping's column, and its key as text. */
const GROUPINGS = {
  day: { column: 'day', text: "to_char(day, 'YYYY-MM-DD')" },
  model: { column: 'model_name', text: 'model_name' },
  member: { column: 'owner_id', text: 'owner_id::text' },
  conversation: { column: 'conversation_id', text: 'conversation_id::text' },
} as const;

export type UsageGrouping = keyof typeof GROUPINGS;

/** The owner's usage rows in the UTC days `[since, until)`: a range of the primary key, read from the index alone. */
const RANGE = 'owner_id = $1 and day >= $2::date and day < $3::date';
const LARGEST_FIRST = 'sum(cost_micro_usd) desc, sum(tokens_in) + sum(tokens_out) desc, 1';

type Range = { ownerId: string; since: string; until: string };

/**
 * Days, models or members: the groups (at most `limit`; days oldest first, the others largest cost
 * first), each row also carrying the sums of all groups (a window over the groups, before the limit).
 * Grouped straight on the column: the index's order serves days, and each group's distinct count
 * sorts only its own rows.
 */
export function usageGroupsQuery(groupBy: Exclude<UsageGrouping, 'conversation'>, range: Range, limit: number): [string, unknown[]] {
  const { column, text } = GROUPINGS[groupBy];
  return [
    `select ${text} as key, sum(cost_micro_usd)::text as cost, sum(tokens_in)::text as tokens_in, sum(tokens_out)::text as tokens_out,
       count(distinct conversation_id)::int as conversations, sum(llm_calls)::text as llm_calls,
       (sum(sum(cost_micro_usd)) over ())::text as total_cost, (sum(sum(tokens_in)) over ())::text as total_tokens_in,
       (sum(sum(tokens_out)) over ())::text as total_tokens_out, (sum(sum(llm_calls)) over ())::text as total_llm_calls,
       (count(*) over ())::int as groups
     from usage_daily where ${RANGE}
     group by ${column} order by ${groupBy === 'day' ? 'day' : LARGEST_FIRST} limit $4`,
    [range.ownerId, range.since, range.until, limit],
  ];
}

/** How many conversations have usage in the range (hashed: `count(distinct …)` would sort every row). */
export function usageConversationCountQuery(range: Range): [string, unknown[]] {
  return [`select count(*)::int as conversations from (select conversation_id from usage_daily where ${RANGE} group by 1) used`, [range.ownerId, range.since, range.until]];
}

/**
 * Conversations: the largest `limit` and, in the last row (`key` null), the totals of the range with
 * its number of groups, from one scan (each conversation's sums, then both).
 */
export function usageConversationsQuery(range: Range, limit: number): [string, unknown[]] {
  return [
    `with per_conversation as materialized (
       select conversation_id, sum(cost_micro_usd) as cost, sum(tokens_in) as tokens_in, sum(tokens_out) as tokens_out, sum(llm_calls) as llm_calls
       from usage_daily where ${RANGE} group by 1
     )
     (select p.conversation_id::text as key, p.cost::text as cost, p.tokens_in::text as tokens_in, p.tokens_out::text as tokens_out, 1 as conversations,
        p.llm_calls::text as llm_calls, null::int as groups
      from per_conversation p order by p.cost desc, p.tokens_in + p.tokens_out desc, p.conversation_id limit $4)
     union all
     select null, coalesce(sum(cost), 0)::text, coalesce(sum(tokens_in), 0)::text, coalesce(sum(tokens_out), 0)::text, count(*)::int,
       coalesce(sum(llm_calls), 0)::text, count(*)::int
     from per_conversation`,
    [range.ownerId, range.since, range.until, limit],
  ];
}

type GroupsRow = UsageGroupRow & { total_cost: string; total_tokens_in: string; total_tokens_out: string; total_llm_calls: string; groups: number };

/** The groups and the totals (with the number of groups) of a range. */
export async function usageReport(em: EntityManager, groupBy: UsageGrouping, range: Range, limit: number): Promise<{ rows: UsageGroupRow[]; totals: UsageSums & { groups: number } }> {
  if (groupBy === 'conversation') {
    const [text, values] = usageConversationsQuery(range, limit);
    const rows = await sqlRows<UsageGroupRow & { groups: number | null }>(em, text, values);
    const totals = rows.pop()!;
    return { rows, totals: { ...totals, groups: totals.groups! } };
  }
  const [text, values] = usageGroupsQuery(groupBy, range, limit);
  const rows = await sqlRows<GroupsRow>(em, text, values);
  const [first] = rows;
  if (!first) return { rows, totals: { cost: '0', tokens_in: '0', tokens_out: '0', conversations: 0, llm_calls: '0', groups: 0 } };
  // A member's conversations are theirs alone: the members' counts add up. Days and models share conversations.
  const conversations =
    groupBy === 'member' ? rows.reduce((sum, row) => sum + row.conversations, 0) : (await sqlRows<{ conversations: number }>(em, ...usageConversationCountQuery(range)))[0]!.conversations;
  const totals = { cost: first.total_cost, tokens_in: first.total_tokens_in, tokens_out: first.total_tokens_out, conversations, llm_calls: first.total_llm_calls, groups: first.groups };
  return { rows, totals };
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
