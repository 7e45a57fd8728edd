import { sqlRows, sqlRun, type SqlRunner } from '../db/sql.ts';

/** The budgets' SQL: an organization's limits, its month's spend (kept by `spend_budget_charge`), per member. */

/** An organization's budget with the current month's spend (amounts as text: bigint). */
export interface BudgetRow {
  month: string;
  monthly_limit: string | null;
  member_monthly_limit: string | null;
  alert_thresholds: number[];
  spent: string;
}

/** The month (UTC, as `charged_at` counts it: the database's clock), the budget (defaults without one) and the month's spend. */
export async function budgetOf(on: SqlRunner, orgId: string): Promise<BudgetRow> {
  const [row] = await sqlRows<BudgetRow>(
    on,
    `with month as (select date_trunc('month', now() at time zone 'UTC')::date as month)
     select to_char(month.month, 'YYYY-MM') as month,
       b.monthly_limit_micro_usd::text as monthly_limit,
       b.member_monthly_limit_micro_usd::text as member_monthly_limit,
       coalesce(b.alert_thresholds, '{50,80,100}')::int[] as alert_thresholds,
       coalesce((select spent_micro_usd from spend_months s where s.owner_id = $1 and s.month = month.month), 0)::text as spent
     from month left join organization_budgets b on b.org_id = $1`,
    [orgId],
  );
  return row!;
}

/** A member (or anyone charged this month) and what they spent this month (text: bigint). */
export interface MemberSpendRow {
  user_id: string;
  email: string | null;
  spent: string;
}

/** Every member of the organization and anyone else charged there this month, largest spend first. */
export function memberSpend(on: SqlRunner, orgId: string): Promise<MemberSpendRow[]> {
  return sqlRows<MemberSpendRow>(
    on,
    `with month as (select date_trunc('month', now() at time zone 'UTC')::date as month),
     spent as (
       select s.member_id, s.spent_micro_usd from spend_member_months s, month where s.owner_id = $1 and s.month = month.month
     ), people as (
       select user_id from organization_members where org_id = $1
       union
       select member_id from spent
     )
     select p.user_id, u.email, coalesce(s.spent_micro_usd, 0)::text as spent
     from people p left join users u on u.id = p.user_id left join spent s on s.member_id = p.user_id
     order by coalesce(s.spent_micro_usd, 0) desc, u.email nulls last, p.user_id`,
    [orgId],
  );
}

/** Stores an organization's budget (micro-dollars; null: no limit). */
export async function upsertBudget(
  on: SqlRunner,
  orgId: string,
  budget: { monthlyLimit: bigint | null; memberMonthlyLimit: bigint | null; alertThresholds: number[] },
): Promise<void> {
  await sqlRun(
    on,
    `insert into organization_budgets (org_id, monthly_limit_micro_usd, member_monthly_limit_micro_usd, alert_thresholds)
     values ($1, $2, $3, $4::smallint[])
     on conflict (org_id) do update set
       monthly_limit_micro_usd = excluded.monthly_limit_micro_usd,
       member_monthly_limit_micro_usd = excluded.member_monthly_limit_micro_usd,
       alert_thresholds = excluded.alert_thresholds,
       updated_at = now()`,
    [orgId, budget.monthlyLimit?.toString() ?? null, budget.memberMonthlyLimit?.toString() ?? null, budget.alertThresholds],
  );
}
