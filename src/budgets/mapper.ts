import type { components } from '../../generated/openapi.ts';
import { microUsdNumberOf, usdOf, usdTextOf } from '../spend/money.ts';
import type { BudgetRow, MemberSpendRow } from './queries.ts';

export type OrganizationBudget = components['schemas']['OrganizationBudget'];
type BudgetAlert = components['schemas']['BudgetAlert'];

/** What the budget is read for: the caller's member and whether they may change it. */
export interface BudgetReader {
  orgId: string;
  userId: string;
  editable: boolean;
}

const bigintOf = (text: string | null): bigint | null => (text === null ? null : BigInt(text));

/** Dollars for a sentence: at least two decimals ("$150.00", "$0.0123"). */
function dollars(micros: bigint): string {
  const [whole, fraction = ''] = usdTextOf(micros).split('.');
  return `$${whole}.${fraction.padEnd(2, '0')}`;
}

/** The highest threshold `spent` has reached of `limit`, as an alert; undefined for none. */
function alertOf(scope: BudgetAlert['scope'], userId: string | null, thresholds: number[], spent: bigint, limit: bigint | null): BudgetAlert | undefined {
  if (limit === null) return undefined;
  const reached = thresholds.filter((percent) => spent * 100n >= limit * BigInt(percent));
  if (reached.length === 0) return undefined;
  return {
    scope,
    user_id: userId,
    percent: Math.max(...reached),
    spend_usd: usdOf(spent),
    spend_micro_usd: microUsdNumberOf(spent),
    limit_usd: usdOf(limit),
    limit_micro_usd: microUsdNumberOf(limit),
  };
}

/** The budget as `getOrganizationBudget` shows it: limits, the month's spend, members, alerts and the caller's `allowed`. */
export function toOrganizationBudget(reader: BudgetReader, budget: BudgetRow, members: MemberSpendRow[]): OrganizationBudget {
  const limit = bigintOf(budget.monthly_limit);
  const memberLimit = bigintOf(budget.member_monthly_limit);
  const spent = BigInt(budget.spent);
  const mine = BigInt(members.find((member) => member.user_id === reader.userId)?.spent ?? 0);
  const reasons: string[] = [];
  if (limit !== null && spent >= limit) {
    reasons.push(`The organization's monthly budget is used up: ${dollars(spent)} spent of ${dollars(limit)} in ${budget.month}.`);
  }
  if (memberLimit !== null && mine >= memberLimit) {
    reasons.push(`Your monthly budget in this organization is used up: ${dollars(mine)} spent of ${dollars(memberLimit)} in ${budget.month}.`);
  }
  const alerts = [
    alertOf('organization', null, budget.alert_thresholds, spent, limit),
    alertOf('member', reader.userId, budget.alert_thresholds, mine, memberLimit),
  ].filter((alert): alert is BudgetAlert => alert !== undefined);
  return {
    org_id: reader.orgId,
    month: budget.month,
    monthly_limit_usd: limit === null ? null : usdOf(limit),
    monthly_limit_micro_usd: limit === null ? null : microUsdNumberOf(limit),
    member_monthly_limit_usd: memberLimit === null ? null : usdOf(memberLimit),
    member_monthly_limit_micro_usd: memberLimit === null ? null : microUsdNumberOf(memberLimit),
    alert_thresholds: budget.alert_thresholds,
    spend_usd: usdOf(spent),
    spend_micro_usd: microUsdNumberOf(spent),
    members: members.map((member) => ({
      user_id: member.user_id,
      email: member.email,
      spend_usd: usdOf(BigInt(member.spent)),
      spend_micro_usd: microUsdNumberOf(BigInt(member.spent)),
    })),
    alerts,
    allowed: reasons.length === 0,
    reason: reasons.length === 0 ? null : reasons.join(' '),
    editable: reader.editable,
  };
}
