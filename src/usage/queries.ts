import type { EntityManager } from '@mikro-orm/postgresql';
import { sqlRows } from '../db/sql.ts';

/** Usage's SQL: the rollups of `usage_daily` (written with the spend ledger's charges, src/spend/queries.ts) read back per group. */

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

/** Each grouping's rollup, column and key as text. */
const GROUPINGS = {
  day: { table: 'usage_owner_days', column: 'day', text: "to_char(day, 'YYYY-MM-DD')" },
  model: { table: 'usage_model_days', column: 'model_name', text: 'model_name' },
  member: { table: 'usage_member_days', column: 'member_id', text: 'member_id::text' },
  conversation: { table: 'usage_conversations', column: 'conversation_id', text: 'conversation_id::text' },
} as const;

export type UsageGrouping = keyof typeof GROUPINGS;

/** The owner's rollup rows of the UTC days `[since, until)`: a range of the primary key. */
const RANGE = 'owner_id = $1 and day >= $2::date and day < $3::date';
/** The distinct conversations of the rows summed: each conversation-day is in the bucket of its previous usage day, so those first in the range are the buckets before `since`. */
const FIRST_IN_RANGE = 'sum(conversations) filter (where prev_day < $2::date)';
const LARGEST_FIRST = 'sum(cost_micro_usd) desc, sum(tokens_in) + sum(tokens_out) desc, 1';

type Range = { ownerId: string; since: string; until: string };

/**
 * Days, models or members from the day rollups (about one row per day, or per day and model, and
 * bucket): the groups (at most `limit`; days oldest first, the others largest cost first), each row
 * also carrying the totals of the range (a window over the groups, before the limit; a model's
 * conversations overlap, so their total comes from the owner's days).
 */
export function usageGroupsQuery(groupBy: Exclude<UsageGrouping, 'conversation'>, range: Range, limit: number): [string, unknown[]] {
  const { table, column, text } = GROUPINGS[groupBy];
  const conversations = groupBy === 'day' ? 'sum(conversations)' : FIRST_IN_RANGE;
  // A conversation used by two models (or members) is in both groups: the total comes from the owner's days.
  const totalConversations = groupBy === 'day' ? `sum(${FIRST_IN_RANGE}) over ()` : `(select ${FIRST_IN_RANGE} from usage_owner_days where ${RANGE})`;
  return [
    `select ${text} as key, sum(cost_micro_usd)::text as cost, sum(tokens_in)::text as tokens_in, sum(tokens_out)::text as tokens_out,
       coalesce(${conversations}, 0)::int as conversations, sum(llm_calls)::text as llm_calls,
       (sum(sum(cost_micro_usd)) over ())::text as total_cost, (sum(sum(tokens_in)) over ())::text as total_tokens_in,
       (sum(sum(tokens_out)) over ())::text as total_tokens_out, (sum(sum(llm_calls)) over ())::text as total_llm_calls,
       coalesce(${totalConversations}, 0)::int as total_conversations, (count(*) over ())::int as groups
     from ${table} where ${RANGE}
     group by ${column} order by ${groupBy === 'day' ? 'day' : LARGEST_FIRST} limit $4`,
    [range.ownerId, range.since, range.until, limit],
  ];
}

/**
 * Conversations: the largest `limit` and, in the last row (`key` null), the totals of the range with
 * its number of groups. The conversations whose usage all lies in the range are read in cost order
 * from `usage_conversations_top` (their running totals are their range's); those that also used
 * something before or after it (their span holds both `since - 1` and `since`, or `until - 1` and
 * `until`: a GiST probe, a handful) are summed from `usage_daily` within the range. The totals are the
 * owner's day rollups.
 */
export function usageConversationsQuery(range: Range, limit: number): [string, unknown[]] {
  const span = "daterange(first_day, last_day, '[]')";
  return [
    `with inside as (
       select conversation_id, cost_micro_usd as cost, tokens_in, tokens_out, llm_calls from usage_conversations
       where owner_id = $1 and ${span} <@ daterange($2::date, $3::date)
       order by cost_micro_usd desc, (tokens_in + tokens_out) desc, conversation_id limit $4
     ), straddling as (
       select d.conversation_id, sum(d.cost_micro_usd) as cost, sum(d.tokens_in) as tokens_in, sum(d.tokens_out) as tokens_out, sum(d.llm_calls) as llm_calls
       from usage_daily d
       where d.conversation_id in (
           select conversation_id from usage_conversations
           where owner_id = $1 and (${span} @> daterange($2::date - 1, $2::date, '[]') or ${span} @> daterange($3::date - 1, $3::date, '[]'))
         ) and d.day >= $2::date and d.day < $3::date
       group by 1
     )
     (select p.conversation_id::text as key, p.cost::text as cost, p.tokens_in::text as tokens_in, p.tokens_out::text as tokens_out, 1 as conversations,
        p.llm_calls::text as llm_calls, null::int as groups
      from (select * from inside union all select * from straddling) p order by p.cost desc, p.tokens_in + p.tokens_out desc, p.conversation_id limit $4)
     union all
     select null, coalesce(sum(cost_micro_usd), 0)::text, coalesce(sum(tokens_in), 0)::text, coalesce(sum(tokens_out), 0)::text, coalesce(${FIRST_IN_RANGE}, 0)::int,
       coalesce(sum(llm_calls), 0)::text, coalesce(${FIRST_IN_RANGE}, 0)::int
     from usage_owner_days where ${RANGE}`,
    [range.ownerId, range.since, range.until, limit],
  ];
}

type GroupsRow = UsageGroupRow & { total_cost: string; total_tokens_in: string; total_tokens_out: string; total_llm_calls: string; total_conversations: number; groups: number };

/** The groups and the totals (with the number of groups) of a range: one statement each. */
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
  const totals = {
    cost: first.total_cost,
    tokens_in: first.total_tokens_in,
    tokens_out: first.total_tokens_out,
    conversations: first.total_conversations,
    llm_calls: first.total_llm_calls,
    groups: first.groups,
  };
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
