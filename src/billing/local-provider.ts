import type { CheckoutRequest, PaymentProvider, ProviderSession } from './payment-provider.ts';

/**
 * The built-in checkout for development and demos: the "payment" is a Confirm button on a page this
 * server serves (`/billing/checkout/{id}`). No money moves, so it credits whoever confirms; use
 * Stripe wherever credits are worth something.
 */
export class LocalPaymentProvider implements PaymentProvider {
  readonly name = 'local' as const;

  async createSession(request: CheckoutRequest): Promise<ProviderSession> {
    return { providerSessionId: request.sessionId, redirectUrl: request.returnUrl };
  }
}
