import type { components } from '../../generated/openapi.ts';
import type { CheckoutSession } from './entities.ts';

export type CheckoutSessionView = components['schemas']['CheckoutSessionSummary'];

/** The API's view of a checkout session (for its owner; the redirect address is not repeated). */
export function toCheckoutSessionView(session: CheckoutSession): CheckoutSessionView {
  return {
    id: session.id,
    amount_usd: session.amountUsd,
    provider: session.provider,
    status: session.status,
    created_at: session.createdAt.toISOString(),
    expires_at: session.expiresAt.toISOString(),
    completed_at: session.completedAt?.toISOString() ?? null,
  };
}
