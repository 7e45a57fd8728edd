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

/** Each grouping's column, and its key as text (formatted after grouping, once per group). */
const GROUPINGS = {
  day: { column: 'day', text: "to_char(key, 'YYYY-MM-DD')" },
  model: { column: 'model_name', text: 'key' },
  member: { column: 'owner_id', text: 'key::text' },
  conversation: { column: 'conversation_id', text: 'key::text' },
} as const;

export type UsageGrouping = keyof typeof GROUPINGS;

/** The owner's usage rows in the UTC days `[since, until)`: a range of the primary key, read from the index alone. */
const RANGE = 'owner_id = $1 and day >= $2::date and day < $3::date';
const SUMS = 'sum(cost_micro_usd) as cost, sum(tokens_in) as tokens_in, sum(tokens_out) as tokens_out, sum(llm_calls) as llm_calls';
// Qualified: the output columns of the same names are text.
const LARGEST_FIRST = 'groups.cost desc, groups.tokens_in + groups.tokens_out desc, groups.key';

/**
 * The groups (at most `limit`, largest cost first; days oldest first) and, in the last row (`key`
 * null), the totals of the range with its number of groups: one statement, one scan, so both see the
 * same rows. Conversations are counted by grouping per (key, conversation) first, which hashes where
 * `count(distinct …)` would sort.
 */
export function usageReportQuery(groupBy: UsageGrouping, range: { ownerId: string; since: string; until: string }, limit: number): [string, unknown[]] {
  const { column, text } = GROUPINGS[groupBy];
  const perConversation =
    groupBy === 'conversation'
      ? `select conversation_id as key, conversation_id, ${SUMS} from usage_daily where ${RANGE} group by 1`
      : `select ${column} as key, conversation_id, ${SUMS} from usage_daily where ${RANGE} group by 1, 2`;
  const order = groupBy === 'day' ? 'groups.key' : LARGEST_FIRST;
  return [
    `with per_conversation as materialized (${perConversation}),
     groups as (
       select key, sum(cost) as cost, sum(tokens_in) as tokens_in, sum(tokens_out) as tokens_out, count(*)::int as conversations, sum(llm_calls) as llm_calls
       from per_conversation group by key
     )
     (select ${text} as key, cost::text as cost, tokens_in::text as tokens_in, tokens_out::text as tokens_out, conversations, llm_calls::text as llm_calls, null::int as groups
      from groups order by ${order} limit $4)
     union all
     select null, coalesce(sum(cost), 0)::text, coalesce(sum(tokens_in), 0)::text, coalesce(sum(tokens_out), 0)::text,
       ${groupBy === 'conversation' ? 'count(*)::int' : '(select count(distinct conversation_id)::int from per_conversation)'},
       coalesce(sum(llm_calls), 0)::text, count(*)::int
     from groups`,
    [range.ownerId, range.since, range.until, limit],
  ];
}

/** The groups and the totals (with the number of groups) of a range. */
export async function usageReport(
  em: EntityManager,
  groupBy: UsageGrouping,
  range: { ownerId: string; since: string; until: string },
  limit: number,
): Promise<{ rows: UsageGroupRow[]; totals: UsageSums & { groups: number } }> {
  const [text, values] = usageReportQuery(groupBy, range, limit);
  const rows = await sqlRows<UsageGroupRow & { key: string | null; groups: number | null }>(em, text, values);
  const totals = rows.pop()!;
  return { rows, totals: { ...totals, groups: totals.groups! } };
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
