import type { operations } from '../../../generated/openapi.ts';
import type { BillingService } from '../../billing/billing-service.ts';
import type { SpendService } from '../../spend/spend-service.ts';
import type { UsageService } from '../../usage/usage-service.ts';
import type { BudgetService, OrganizationBudgetUpdate } from '../../budgets/budget-service.ts';
import { CHECKOUT_PAGE_HEADERS, renderCheckoutNotFoundPage, renderCheckoutPage, type ReturnOutcome } from '../../billing/checkout-page.ts';
import { principalOf, rawBodyOf, respond, type KoaContext, type OperationHandlers } from '../context.ts';

type CheckoutBody = operations['createCheckoutSession']['requestBody']['content']['application/json'];
type CreditsQuery = NonNullable<operations['getCredits']['parameters']['query']>;
type SpendQuery = NonNullable<operations['getSpend']['parameters']['query']>;
type UsageQuery = NonNullable<operations['getUsage']['parameters']['query']>;
type PagePath = operations['getCheckoutPage']['parameters']['path'];
type PageQuery = NonNullable<operations['getCheckoutPage']['parameters']['query']>;

function sendPage(ctx: KoaContext, status: number, html: string): void {
  ctx.status = status;
  ctx.set(CHECKOUT_PAGE_HEADERS);
  ctx.type = 'text/html; charset=utf-8';
  ctx.body = html;
}

/** Post/redirect/get: a form post answers 303 to the page, so reloading it posts nothing again. */
function backToPage(ctx: KoaContext, id: string): void {
  ctx.set(CHECKOUT_PAGE_HEADERS);
  // The spec's 303 has no body: Location only (Koa's redirect would add a "Redirecting to" text).
  ctx.status = 303;
  ctx.set('Location', `/billing/checkout/${id}`);
  ctx.body = '';
}

/**
 * Handlers of the `billing` tag: E4, the caller's credits, spend and usage, the organization's budget,
 * the Stripe webhook and the checkout page. A checkout button that can no longer do what it says answers 409 with the page
 * showing the state.
 */
export function billingHandlers(service: BillingService, spend: SpendService, usage: UsageService, budgets: BudgetService): OperationHandlers {
  return {
    async createCheckoutSession(operation, ctx) {
      const { amount } = operation.request.requestBody as CheckoutBody;
      respond(ctx, 200, await service.createCheckoutSession(principalOf(operation).orgId, amount));
    },
    async getCredits(operation, ctx) {
      const { limit } = operation.request.query as CreditsQuery;
      respond(ctx, 200, await service.credits(principalOf(operation).orgId, limit ?? 20));
    },
    async getSpend(operation, ctx) {
      const query = operation.request.query as SpendQuery;
      const report = await spend.report(principalOf(operation).orgId, {
        groupBy: query.group_by ?? 'conversation',
        since: query.since,
        until: query.until,
        memberId: query.member_id,
        limit: query.limit ?? 50,
        offset: query.offset ?? 0,
        order: query.order ?? 'default',
      });
      respond(ctx, 200, report);
    },
    async getUsage(operation, ctx) {
      const query = operation.request.query as UsageQuery;
      const report = await usage.report(principalOf(operation).orgId, {
        groupBy: query.group_by ?? 'day',
        since: query.since,
        until: query.until,
        limit: query.limit ?? 20,
      });
      respond(ctx, 200, report);
    },
    async getOrganizationBudget(operation, ctx) {
      respond(ctx, 200, await budgets.read(principalOf(operation)));
    },
    async updateOrganizationBudget(operation, ctx) {
      respond(ctx, 200, await budgets.update(principalOf(operation), operation.request.requestBody as OrganizationBudgetUpdate));
    },
    async handleStripeWebhook(_operation, ctx) {
      await service.handleStripeWebhook(rawBodyOf(ctx), ctx.get('stripe-signature') || undefined);
      respond(ctx, 200, { success: true });
    },
    async getCheckoutPage(operation, ctx) {
      const { session_id } = operation.request.params as PagePath;
      const { outcome } = operation.request.query as PageQuery;
      const session = await service.findCheckoutSession(session_id);
      if (!session) return sendPage(ctx, 404, renderCheckoutNotFoundPage());
      sendPage(ctx, 200, renderCheckoutPage(session, outcome as ReturnOutcome | undefined));
    },
    async confirmCheckout(operation, ctx) {
      const { session_id } = operation.request.params as PagePath;
      if (!(await service.findCheckoutSession(session_id))) return sendPage(ctx, 404, renderCheckoutNotFoundPage());
      if (await service.confirmLocal(session_id)) return backToPage(ctx, session_id);
      sendPage(ctx, 409, renderCheckoutPage(await service.checkoutSession(session_id)));
    },
    async cancelCheckout(operation, ctx) {
      const { session_id } = operation.request.params as PagePath;
      if (!(await service.findCheckoutSession(session_id))) return sendPage(ctx, 404, renderCheckoutNotFoundPage());
      if (await service.cancelLocal(session_id)) return backToPage(ctx, session_id);
      sendPage(ctx, 409, renderCheckoutPage(await service.checkoutSession(session_id)));
    },
  };
}
