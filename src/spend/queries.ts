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
 * Adds the increases to today's (UTC) usage, in one statement: the conversation's rows of
 * `usage_daily`, its running totals (`usage_conversations`), and the owner's day, member-day and model-day
 * rollups in the bucket of the conversation's previous usage day, counting the conversation (and each
 * model's) once on the first post of its day (docs/performance.md, "Usage"). The day is that of
 * `now()`, the transaction's instant, which is also the `charged_at` of the entries it writes. The
 * caller holds the conversation's lock; the owner's shared model-day rows are written in model order,
 * so two conversations of one owner lock them in the same order.
 */
export async function addDailyUsage(
  trx: SqlRunner,
  ownerId: string,
  memberId: string,
  conversationId: string,
  increases: readonly DailyUsageIncrease[],
): Promise<void> {
  // Prepared once per connection (its plan is primary-key lookups whatever the values): no planning of its seven parts per post.
  await sqlRows(
    trx,
    `with increase as (
       select * from unnest($3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[]) as i (model_name, cost, tokens_in, tokens_out, llm_calls)
     ), today as (
       select (now() at time zone 'UTC')::date as day
     ), post as (
       select sum(cost) as cost, sum(tokens_in) as tokens_in, sum(tokens_out) as tokens_out, sum(llm_calls) as llm_calls from increase
     ), conversation_bucket as (
       -- the usage day before today's (-infinity for none); new today unless today was seen already
       select coalesce(case when c.last_day >= t.day then c.prev_day else c.last_day end, '-infinity'::date) as prev_day,
         (c.last_day is null or c.last_day < t.day) as new_today
       from today t left join usage_conversations c on c.conversation_id = $2
     ), member_bucket as (
       -- the same for the member's usage of the conversation
       select coalesce(case when m.last_day >= t.day then m.prev_day else m.last_day end, '-infinity'::date) as prev_day,
         (m.last_day is null or m.last_day < t.day) as new_today
       from today t left join usage_conversation_members m on m.conversation_id = $2 and m.member_id = $8
     ), model_buckets as (
       select i.*, coalesce(case when m.last_day >= t.day then m.prev_day else m.last_day end, '-infinity'::date) as prev_day,
         (m.last_day is null or m.last_day < t.day) as new_today
       from increase i cross join today t left join usage_conversation_models m on m.conversation_id = $2 and m.model_name = i.model_name
     ), daily as (
       insert into usage_daily as d (owner_id, day, conversation_id, model_name, cost_micro_usd, tokens_in, tokens_out, llm_calls)
       select $1, t.day, $2, i.model_name, i.cost, i.tokens_in, i.tokens_out, i.llm_calls from increase i cross join today t
       on conflict (conversation_id, day, model_name) do update set
         cost_micro_usd = d.cost_micro_usd + excluded.cost_micro_usd,
         tokens_in = d.tokens_in + excluded.tokens_in,
         tokens_out = d.tokens_out + excluded.tokens_out,
         llm_calls = d.llm_calls + excluded.llm_calls
     ), conversation_totals as (
       insert into usage_conversations as c (conversation_id, owner_id, first_day, last_day, prev_day, cost_micro_usd, tokens_in, tokens_out, llm_calls)
       select $2, $1, t.day, t.day, '-infinity'::date, p.cost, p.tokens_in, p.tokens_out, p.llm_calls from today t cross join post p
       on conflict (conversation_id) do update set
         first_day = least(c.first_day, excluded.first_day),
         prev_day = case when excluded.last_day > c.last_day then c.last_day else c.prev_day end,
         last_day = greatest(c.last_day, excluded.last_day),
         cost_micro_usd = c.cost_micro_usd + excluded.cost_micro_usd,
         tokens_in = c.tokens_in + excluded.tokens_in,
         tokens_out = c.tokens_out + excluded.tokens_out,
         llm_calls = c.llm_calls + excluded.llm_calls
     ), model_days_seen as (
       insert into usage_conversation_models as m (conversation_id, model_name, owner_id, last_day, prev_day)
       select $2, i.model_name, $1, t.day, '-infinity'::date from increase i cross join today t
       on conflict (conversation_id, model_name) do update set
         prev_day = case when excluded.last_day > m.last_day then m.last_day else m.prev_day end,
         last_day = greatest(m.last_day, excluded.last_day)
     ), member_days_seen as (
       insert into usage_conversation_members as m (conversation_id, member_id, owner_id, last_day, prev_day)
       select $2, $8, $1, t.day, '-infinity'::date from today t
       on conflict (conversation_id, member_id) do update set
         prev_day = case when excluded.last_day > m.last_day then m.last_day else m.prev_day end,
         last_day = greatest(m.last_day, excluded.last_day)
     ), member_day as (
       insert into usage_member_days as d (owner_id, day, member_id, prev_day, conversations, cost_micro_usd, tokens_in, tokens_out, llm_calls)
       select $1, t.day, $8, b.prev_day, b.new_today::int, p.cost, p.tokens_in, p.tokens_out, p.llm_calls
       from today t cross join member_bucket b cross join post p
       on conflict (owner_id, day, member_id, prev_day) do update set
         conversations = d.conversations + excluded.conversations,
         cost_micro_usd = d.cost_micro_usd + excluded.cost_micro_usd,
         tokens_in = d.tokens_in + excluded.tokens_in,
         tokens_out = d.tokens_out + excluded.tokens_out,
         llm_calls = d.llm_calls + excluded.llm_calls
     ), owner_day as (
       insert into usage_owner_days as d (owner_id, day, prev_day, conversations, cost_micro_usd, tokens_in, tokens_out, llm_calls)
       select $1, t.day, b.prev_day, b.new_today::int, p.cost, p.tokens_in, p.tokens_out, p.llm_calls
       from today t cross join conversation_bucket b cross join post p
       on conflict (owner_id, day, prev_day) do update set
         conversations = d.conversations + excluded.conversations,
         cost_micro_usd = d.cost_micro_usd + excluded.cost_micro_usd,
         tokens_in = d.tokens_in + excluded.tokens_in,
         tokens_out = d.tokens_out + excluded.tokens_out,
         llm_calls = d.llm_calls + excluded.llm_calls
     )
     insert into usage_model_days as d (owner_id, day, model_name, prev_day, conversations, cost_micro_usd, tokens_in, tokens_out, llm_calls)
     select $1, t.day, b.model_name, b.prev_day, b.new_today::int, b.cost, b.tokens_in, b.tokens_out, b.llm_calls
     from model_buckets b cross join today t order by b.model_name
     on conflict (owner_id, day, model_name, prev_day) do update set
       conversations = d.conversations + excluded.conversations,
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
      memberId,
    ],
    'usage_add_daily',
  );
}

/** One ledger entry per charge. */
export async function insertEntries(
  trx: SqlRunner,
  ownerId: string,
  memberId: string,
  conversationId: string,
  charges: readonly { usageId: string; modelName: string; amount: bigint }[],
): Promise<void> {
  const values: unknown[] = [];
  const rows = charges.map(({ usageId, modelName, amount }) => {
    const at = values.push(ownerId, memberId, conversationId, usageId, modelName, amount.toString()) - 6;
    return `($${at + 1}, $${at + 2}, $${at + 3}, $${at + 4}, $${at + 5}, $${at + 6})`;
  });
  await sqlRun(
    trx,
    `insert into spend_entries (owner_id, member_id, conversation_id, usage_id, model_name, amount_micro_usd) values ${rows.join(', ')}`,
    values,
  );
}

/** Adds `amount` to the owner's total (its row lock orders the owner's charges); returns the total and what the owner bought, as text. */
export async function addToTotal(trx: SqlRunner, ownerId: string, amount: bigint): Promise<{ spent: string; purchased: string }> {
  const [balance] = await sqlRows<{ spent: string; purchased: string }>(
    trx,
    `insert into spend_totals as t (owner_id, spent_micro_usd) values ($1, $2)
     on conflict (owner_id) do update set spent_micro_usd = t.spent_micro_usd + excluded.spent_micro_usd
     returning spent_micro_usd::text as spent,
       (select coalesce(sum(amount_usd), 0) from credit_ledger where owner_id = $1)::text as purchased`,
    [ownerId, amount.toString()],
  );
  return balance!;
}

/** The `billing.balance_depleted` outbound message, stored with its cause (src/db/functions/webhook_enqueue.sql). */
export async function enqueueBalanceDepleted(trx: SqlRunner, ownerId: string, data: Record<string, unknown>): Promise<void> {
  await sqlRows(trx, `select webhook_enqueue($1::uuid, null, 'billing.balance_depleted', $2::jsonb)`, [ownerId, JSON.stringify(data)]);
}

/**
 * Adds a charge to the month's spend of the organization and the member and stores the budget alerts it
 * reaches (src/db/functions/spend_budget_charge.sql); returns how many alerts it stored.
 */
export async function chargeBudget(trx: SqlRunner, ownerId: string, memberId: string, amount: bigint): Promise<number> {
  const [row] = await sqlRows<{ alerts: number }>(trx, 'select spend_budget_charge($1::uuid, $2::uuid, $3::bigint) as alerts', [ownerId, memberId, amount.toString()]);
  return row!.alerts;
}

/** The key and the order of each grouping; the key is what `count(distinct …)` counts too. */
const GROUPINGS = {
  conversation: { key: 'conversation_id::text', order: 'max(charged_at) desc, 1' },
  model: { key: 'model_name', order: 'sum(amount_micro_usd) desc, 1' },
  day: { key: "to_char(charged_at at time zone 'UTC', 'YYYY-MM-DD')", order: '1 desc' },
  // '': charges from before members were recorded (count(distinct …) would not count a null).
  member: { key: "coalesce(member_id::text, '')", order: 'sum(amount_micro_usd) desc, 1' },
} as const;

export type SpendGroupKey = keyof typeof GROUPINGS;

/** The entries of a report: an owner's, in `[since, until)`, of one member when given. */
export interface SpendRange {
  ownerId: string;
  since?: string;
  until?: string;
  memberId?: string;
}

/** The range's entries: the condition and its values. */
function rangeOf({ ownerId, since, until, memberId }: SpendRange): { where: string; values: unknown[] } {
  const values: unknown[] = [ownerId];
  let where = 'owner_id = $1';
  if (since) where += ` and charged_at >= $${values.push(since)}`;
  if (until) where += ` and charged_at < $${values.push(until)}`;
  if (memberId) where += ` and member_id = $${values.push(memberId)}`;
  return { where, values };
}

/** The totals of a range: amount (text), entries, groups. */
export async function spendTotals(
  em: EntityManager,
  groupBy: SpendGroupKey,
  range: SpendRange,
): Promise<{ total: string; entries: number; groups: number }> {
  const { where, values } = rangeOf(range);
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
  range: SpendRange,
  page: { limit: number; offset: number; order: 'default' | 'amount' },
): Promise<SpendGroupRow[]> {
  const { where, values } = rangeOf(range);
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

/** The e-mail of each of these users that still exists. */
export function userEmails(em: EntityManager, userIds: string[]): Promise<{ id: string; email: string }[]> {
  return sqlRows(em, 'select id, email from users where id = any($1::uuid[])', [userIds]);
}

/** The stored title (JSON text) of each of these conversations that has one. */
export function conversationTitles(em: EntityManager, conversationIds: string[]): Promise<{ conversation_id: string; title: string | null }[]> {
  return sqlRows(em, 'select conversation_id, title::text as title from conversation_infos where conversation_id = any($1::uuid[])', [conversationIds]);
}
