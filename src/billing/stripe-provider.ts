import Stripe from 'stripe';
import type { StripeConfig } from '../config.ts';
import { InvalidSignatureError, UnavailableError } from '../errors.ts';
import type { Logger } from '../logger.ts';
import type { CheckoutRequest, PaymentProvider, ProviderSession } from './payment-provider.ts';

export type StripeEvent = Stripe.Event;
export type StripeCheckoutSession = Stripe.Checkout.Session;

/**
 * Stripe Checkout through the official SDK. A session is opened in `payment` mode for one line item
 * of `amount × 100` US cents, expiring when our session does, and carrying our session id as
 * `client_reference_id` and in `metadata`; the payment methods are those enabled in the Stripe
 * dashboard. Payments complete through the signed webhook (`verifyEvent`).
 */
export class StripePaymentProvider implements PaymentProvider {
  readonly name = 'stripe' as const;
  private readonly stripe: Stripe;

  constructor(
    private readonly config: StripeConfig,
    private readonly log: Logger,
  ) {
    const api = config.apiBaseUrl;
    this.stripe = new Stripe(config.secretKey, {
      maxNetworkRetries: 1,
      timeout: 10_000,
      telemetry: false,
      appInfo: { name: 'agent-platform-control-plane' },
      ...(api
        ? {
            host: api.hostname.replace(/^\[|\]$/g, ''),
            port: api.port || (api.protocol === 'https:' ? 443 : 80),
            protocol: api.protocol === 'https:' ? ('https' as const) : ('http' as const),
          }
        : {}),
    });
  }

  async createSession(request: CheckoutRequest): Promise<ProviderSession> {
    let session: Stripe.Checkout.Session;
    try {
      session = await this.stripe.checkout.sessions.create(
        {
          mode: 'payment',
          line_items: [
            {
              quantity: 1,
              price_data: {
                currency: 'usd',
                unit_amount: request.amountUsd * 100,
                product_data: { name: `Platform credit: ${request.amountUsd} USD` },
              },
            },
          ],
          success_url: `${request.returnUrl}?outcome=success`,
          cancel_url: `${request.returnUrl}?outcome=cancel`,
          client_reference_id: request.sessionId,
          metadata: { checkout_session_id: request.sessionId, owner_id: request.ownerId },
          expires_at: Math.floor(request.expiresAt.getTime() / 1000),
        },
        // A retried request (ours or the SDK's) opens the same Stripe session, not a second one.
        { idempotencyKey: `checkout-${request.sessionId}` },
      );
    } catch (error) {
      // Only what identifies the failure: Stripe's messages can quote the (masked) key or the request.
      const { type, code, statusCode, requestId } = (error ?? {}) as Partial<Stripe.errors.StripeError>;
      this.log.error({ provider: 'stripe', type, code, statusCode, stripeRequestId: requestId }, 'stripe checkout session not created');
      throw new UnavailableError('The payment provider is unavailable, please try again later.');
    }
    if (!session.url) {
      this.log.error({ provider: 'stripe', stripeSessionId: session.id }, 'stripe returned a checkout session without a url');
      throw new UnavailableError('The payment provider is unavailable, please try again later.');
    }
    return { providerSessionId: session.id, redirectUrl: session.url };
  }

  /**
   * The event a webhook delivers, after the SDK has checked its `Stripe-Signature` over the exact
   * bytes received, against the webhook secret, within Stripe's default tolerance of 5 minutes (so a
   * captured delivery cannot be replayed later).
   */
  verifyEvent(rawBody: Buffer, signature: string | undefined): Stripe.Event {
    if (!signature) throw new InvalidSignatureError('Missing Stripe-Signature header');
    try {
      return this.stripe.webhooks.constructEvent(rawBody, signature, this.config.webhookSecret);
    } catch (error) {
      if (error instanceof Stripe.errors.StripeSignatureVerificationError) {
        throw new InvalidSignatureError('Invalid Stripe-Signature: the payload is not signed with our webhook secret, or too old');
      }
      throw error;
    }
  }
}
