import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../../generated/openapi.ts';
import { recordAudit } from '../audit/audit-service.ts';
import { InvalidInputError } from '../errors.ts';
import type { Principal } from '../identity/authenticator.ts';
import { numberTextOf } from '../lossless-json.ts';
import { roleAllows } from '../organizations/roles.ts';
import { microUsdOfDecimal } from '../spend/money.ts';
import { toOrganizationBudget, type OrganizationBudget } from './mapper.ts';
import * as queries from './queries.ts';

export type OrganizationBudgetUpdate = components['schemas']['OrganizationBudgetUpdate'];

/**
 * An organization's monthly budget (docs/billing.md, "Budgets"): read by any member and by the
 * organization's session API keys, changed by those who manage billing. The month's spend it is checked
 * against is kept by the spend ledger as it charges (`spend_budget_charge`); so are its alerts.
 */
export class BudgetService {
  constructor(private readonly em: EntityManager) {}

  /** The budget of the organization `principal` acts in, with the month's spend and `allowed` for the caller. */
  async read(principal: Principal): Promise<OrganizationBudget> {
    const budget = await queries.budgetOf(this.em, principal.orgId);
    const members = await queries.memberSpend(this.em, principal.orgId);
    return toOrganizationBudget(readerOf(principal), budget, members);
  }

  /** Replaces the budget (amounts read from the JSON text as sent: a double never carries money here), audited. */
  async update(principal: Principal, body: OrganizationBudgetUpdate): Promise<OrganizationBudget> {
    const thresholds = body.alert_thresholds;
    const unordered = thresholds.findIndex((percent, n) => n > 0 && percent <= thresholds[n - 1]!);
    if (unordered !== -1) {
      throw new InvalidInputError('Value error, alert thresholds must be ascending, without repeats', ['body', 'alert_thresholds'], 'value_error', thresholds);
    }
    const budget = {
      monthlyLimit: limitOf(body, 'monthly_limit_usd'),
      memberMonthlyLimit: limitOf(body, 'member_monthly_limit_usd'),
      alertThresholds: thresholds,
    };
    await this.em.fork().transactional(async (em) => {
      await queries.upsertBudget(em, principal.orgId, budget);
      await recordAudit(em, {
        actor: principal.userId,
        action: 'budget.updated',
        targetType: 'organization',
        targetId: principal.orgId,
        summary: {
          monthly_limit_micro_usd: budget.monthlyLimit?.toString() ?? null,
          member_monthly_limit_micro_usd: budget.memberMonthlyLimit?.toString() ?? null,
          alert_thresholds: thresholds,
        },
      });
    });
    return this.read(principal);
  }
}

function readerOf(principal: Principal) {
  return { orgId: principal.orgId, userId: principal.userId, editable: roleAllows(principal.orgRole, 'MANAGE_BILLING') };
}

/** A limit in micro-dollars from its literal as sent (the schema bounds it to 0–1,000,000,000); null or absent: none. */
function limitOf(body: OrganizationBudgetUpdate, key: 'monthly_limit_usd' | 'member_monthly_limit_usd'): bigint | null {
  const text = numberTextOf(body, key);
  return text === undefined ? null : microUsdOfDecimal(text);
}
