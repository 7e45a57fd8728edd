-- Adds a charge to its organization's and its member's spend of the month (UTC) and, for each alert
-- threshold of the organization's budget that the new spend reaches for the first time this month,
-- records the alert (budget_alerts: once per organization or member, month and threshold) and stores
-- one billing.budget_threshold outbound message (webhook_enqueue). Called by src/spend/spend-ledger.ts
-- once per charged conversation info, in the charge's transaction, after spend_totals' row lock has
-- ordered the organization's charges. Returns how many alerts it recorded.
create or replace function spend_budget_charge(p_owner uuid, p_member uuid, p_amount bigint)
returns integer language plpgsql as $$
declare
  v_month date := date_trunc('month', now() at time zone 'UTC')::date;
  v_org_spent bigint;
  v_member_spent bigint;
  v_budget organization_budgets%rowtype;
  v_alerts integer := 0;
  r record;
begin
  insert into spend_months as m (owner_id, month, spent_micro_usd) values (p_owner, v_month, p_amount)
  on conflict (owner_id, month) do update set spent_micro_usd = m.spent_micro_usd + excluded.spent_micro_usd
  returning spent_micro_usd into v_org_spent;
  if p_member is not null then
    insert into spend_member_months as m (owner_id, month, member_id, spent_micro_usd) values (p_owner, v_month, p_member, p_amount)
    on conflict (owner_id, month, member_id) do update set spent_micro_usd = m.spent_micro_usd + excluded.spent_micro_usd
    returning spent_micro_usd into v_member_spent;
  end if;

  select * into v_budget from organization_budgets where org_id = p_owner;
  if not found then
    return 0;
  end if;
  for r in
    select s.scope, s.member_id, s.spent, s.lim, t.percent
    from (values
      ('organization', '00000000-0000-0000-0000-000000000000'::uuid, v_org_spent, v_budget.monthly_limit_micro_usd),
      ('member', p_member, v_member_spent, v_budget.member_monthly_limit_micro_usd)
    ) as s (scope, member_id, spent, lim)
    cross join unnest(v_budget.alert_thresholds) as t (percent)
    where s.member_id is not null and s.lim is not null and s.spent * 100 >= s.lim * t.percent
    order by s.scope desc, t.percent
  loop
    insert into budget_alerts (owner_id, month, scope, member_id, percent, spent_micro_usd, limit_micro_usd)
    values (p_owner, v_month, r.scope, r.member_id, r.percent, r.spent, r.lim)
    on conflict do nothing;
    if found then
      v_alerts := v_alerts + 1;
      perform webhook_enqueue(p_owner, null, 'billing.budget_threshold', jsonb_build_object(
        'org_id', p_owner,
        'scope', r.scope,
        'user_id', case when r.scope = 'member' then r.member_id end,
        'percent', r.percent,
        'spend_usd', trim_scale(r.spent::numeric / 1000000),
        'spend_micro_usd', r.spent,
        'limit_usd', trim_scale(r.lim::numeric / 1000000),
        'limit_micro_usd', r.lim,
        'month', to_char(v_month, 'YYYY-MM')
      ));
    end if;
  end loop;
  return v_alerts;
end
$$;
