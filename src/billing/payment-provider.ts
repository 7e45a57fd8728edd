import type { PaymentProviderName } from './entities.ts';

/** What a provider needs to open a checkout for one of our sessions. */
export interface CheckoutRequest {
  /** Our checkout session id (a UUID), known to the provider so its events lead back to us. */
  readonly sessionId: string;
  /** The organization that pays. */
  readonly ownerId: string;
  /** Whole US dollars. */
  readonly amountUsd: number;
  /** When the session stops accepting payment. */
  readonly expiresAt: Date;
  /** Our page for this session; the provider sends the payer back here (success or cancel). */
  readonly returnUrl: string;
}

/** The provider's side of a new checkout. */
export interface ProviderSession {
  /** The provider's id of the session (Stripe's `cs_…`). */
  readonly providerSessionId: string;
  /** Where to send the payer's browser. */
  readonly redirectUrl: string;
}

/**
 * A way to take a payment: Stripe Checkout, or the built-in local checkout. How a payment completes
 * differs (a signed Stripe webhook; a button on our own page), so only the start is shared.
 */
export interface PaymentProvider {
  readonly name: PaymentProviderName;
  /** Opens a checkout; throws `UnavailableError` when the provider cannot be reached. */
  createSession(request: CheckoutRequest): Promise<ProviderSession>;
}
