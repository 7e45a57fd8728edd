import { Migration } from '@mikro-orm/migrations';

/**
 * Budgets (docs/billing.md, "Budgets"): an organization's monthly limits and alert thresholds, the month's
 * spend kept as it is charged, and the alerts already sent.
 *
 * - `spend_entries.member_id`: the member whose session API key posted the info that caused the charge.
 *   Null for charges made before this migration. No foreign key, as for `conversation_id`: money spent
 *   stays charged (and attributed) whatever happens to the user, and no index to keep up on each charge.
 * - `spend_months` / `spend_member_months`: the organization's and each member's spend per calendar month
 *   (UTC), added to by `spend_budget_charge` in the charge's transaction: the budget is read and checked
 *   against them without summing the ledger. `spend_months` starts from the ledger as it stands.
 * - `organization_budgets`: the limits (null: none) and the alert thresholds, in percent of a limit.
 * - `budget_alerts`: one row per alert sent (organization or member scope, month, threshold): the key that
 *   makes each `billing.budget_threshold` message go once. The organization scope's member is the nil UUID.
 */
/** Each organization's spend per month (UTC) from the ledger as it stands (a test runs it too). */
export function spendMonthsBackfill(): string {
  return `
    insert into spend_months (owner_id, month, spent_micro_usd)
    select owner_id, date_trunc('month', charged_at at time zone 'UTC')::date, sum(amount_micro_usd)
    from spend_entries group by 1, 2;
  `;
}

export class Migration20261127221000_budgets extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      alter table spend_entries add column member_id uuid;

      create table spend_months (
        owner_id uuid not null references organizations (id) on delete cascade,
        month date not null,
        spent_micro_usd bigint not null check (spent_micro_usd >= 0),
        primary key (owner_id, month)
      );
      ${spendMonthsBackfill()}

      create table spend_member_months (
        owner_id uuid not null references organizations (id) on delete cascade,
        month date not null,
        member_id uuid not null,
        spent_micro_usd bigint not null check (spent_micro_usd >= 0),
        primary key (owner_id, month, member_id)
      );

      create table organization_budgets (
        org_id uuid primary key references organizations (id) on delete cascade,
        monthly_limit_micro_usd bigint check (monthly_limit_micro_usd >= 0),
        member_monthly_limit_micro_usd bigint check (member_monthly_limit_micro_usd >= 0),
        alert_thresholds smallint[] not null default '{50,80,100}',
        updated_at timestamptz not null default now()
      );

      create table budget_alerts (
        owner_id uuid not null references organizations (id) on delete cascade,
        month date not null,
        scope varchar(16) not null check (scope in ('organization', 'member')),
        member_id uuid not null,
        percent smallint not null,
        spent_micro_usd bigint not null,
        limit_micro_usd bigint not null,
        sent_at timestamptz not null default now(),
        primary key (owner_id, month, scope, member_id, percent)
      );
    `);
  }

  override async down(): Promise<void> {
    this.addSql(`
      drop function if exists spend_budget_charge(uuid, uuid, bigint);
      drop table budget_alerts;
      drop table organization_budgets;
      drop table spend_member_months;
      drop table spend_months;
      alter table spend_entries drop column member_id;
    `);
  }
}
