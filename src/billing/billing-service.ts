import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../../generated/openapi.ts';
import type { BillingConfig } from '../config.ts';
import { recordAudit } from '../audit/audit-service.ts';
import { InvalidInputError, NotFoundError } from '../errors.ts';
import type { Logger } from '../logger.ts';
import { CheckoutSession, type PaymentProviderName } from './entities.ts';
import { toCheckoutSessionView } from './mapper.ts';
import * as queries from './queries.ts';
import type { InTime } from './queries.ts';
import { LocalPaymentProvider } from './local-provider.ts';
import type { PaymentProvider } from './payment-provider.ts';
import { StripePaymentProvider, type StripeCheckoutSession } from './stripe-provider.ts';
import { toCreditAmounts } from '../spend/mapper.ts';
import { MICROS_PER_USD } from '../spend/money.ts';

export type CreditsView = components['schemas']['Credits'];

/** What a Stripe webhook delivery did; every outcome is acknowledged with 200 so Stripe stops retrying. */
export type StripeWebhookOutcome = 'completed' | 'duplicate' | 'expired' | 'ignored';

/** The Stripe events that concern a checkout session; every other type is acknowledged and ignored. */
const HANDLED_STRIPE_EVENTS: ReadonlySet<string> = new Set([
  'checkout.session.completed',
  'checkout.session.async_payment_succeeded',
  'checkout.session.async_payment_failed',
  'checkout.session.expired',
]);

/**
 * Checkout sessions and credits. A session is created `pending` through the configured payment
 * provider and ends `completed` (credited once), `cancelled` (local checkout only) or `expired`.
 */
export class BillingService {
  constructor(
    private readonly em: EntityManager,
    private readonly config: BillingConfig,
    private readonly provider: PaymentProvider,
    private readonly log: Logger,
    /** Present when Stripe is the provider: it verifies the webhook's signatures. */
    private readonly stripe?: StripePaymentProvider,
  ) {}

  /** Starts a payment of `amountUsd` for the organization `ownerId`; the schema has checked it is an integer ≥ 1. */
  async createCheckoutSession(ownerId: string, amountUsd: number): Promise<components['schemas']['CheckoutSession']> {
    const max = this.config.maxAmountUsd;
    if (amountUsd > max) {
      throw new InvalidInputError(`Input should be less than or equal to ${max}`, ['body', 'amount'], 'less_than_equal', amountUsd);
    }
    const id = randomUUID();
    // Whole seconds: Stripe keeps `expires_at` in seconds, and both sides must expire together.
    const expiresAt = new Date(Math.ceil((Date.now() + this.config.sessionTtlMinutes * 60_000) / 1000) * 1000);
    const returnUrl = this.checkoutPageUrl(id);
    const opened = await this.provider.createSession({ sessionId: id, ownerId, amountUsd, expiresAt, returnUrl });
    const em = this.em.fork();
    em.create(CheckoutSession, {
      id,
      ownerId,
      amountUsd,
      provider: this.provider.name,
      providerSessionId: opened.providerSessionId,
      redirectUrl: opened.redirectUrl,
      expiresAt,
    });
    await em.flush();
    this.log.info({ checkoutSessionId: id, provider: this.provider.name, amountUsd }, 'checkout session created');
    return { redirect_url: opened.redirectUrl };
  }

  /**
   * What the caller bought (the sum of their credits), what their agents spent (the spend ledger's
   * running total), the balance, and their most recent sessions. Both sums come from one statement,
   * so they are of the same moment.
   */
  async credits(ownerId: string, limit: number): Promise<CreditsView> {
    await queries.expireOverdue(this.em, 'owner_id', ownerId);
    const sums = await queries.creditSums(this.em, ownerId);
    const sessions = await this.em
      .fork()
      .find(CheckoutSession, { ownerId }, { orderBy: [{ createdAt: 'desc' }, { id: 'asc' }], limit });
    return {
      ...toCreditAmounts(BigInt(sums.purchased) * MICROS_PER_USD, BigInt(sums.spent)),
      sessions: sessions.map(toCheckoutSessionView),
    };
  }

  /** A session as its checkout page shows it, with an overdue pending session marked expired first. */
  async checkoutSession(id: string): Promise<CheckoutSession> {
    const session = await this.findCheckoutSession(id);
    if (!session) throw new NotFoundError('Checkout session not found');
    return session;
  }

  /** The session with `id` (expired first when overdue), or undefined when there is none. */
  async findCheckoutSession(id: string): Promise<CheckoutSession | undefined> {
    await queries.expireOverdue(this.em, 'id', id);
    return (await this.em.fork().findOne(CheckoutSession, { id })) ?? undefined;
  }

  /**
   * The local checkout's Confirm button: credits the session once. True when the session is paid
   * (by this call or an earlier one: a double click is harmless); false when it cannot be paid here
   * (expired, cancelled, or a Stripe session).
   */
  async confirmLocal(id: string): Promise<boolean> {
    if (await this.complete(id, 'local')) {
      this.log.info({ checkoutSessionId: id }, 'local checkout confirmed; credited');
      return true;
    }
    const session = await this.checkoutSession(id);
    return session.provider === 'local' && session.status === 'completed';
  }

  /**
   * The local checkout's Cancel button: a pending session becomes cancelled. True when the session
   * is cancelled (now or before); false when it cannot be (completed, expired, or a Stripe session).
   */
  async cancelLocal(id: string): Promise<boolean> {
    if (await queries.cancelLocalSession(this.em, id)) return true;
    const session = await this.checkoutSession(id);
    return session.provider === 'local' && session.status === 'cancelled';
  }

  /**
   * A Stripe webhook delivery: verified over its exact bytes, then `checkout.session.completed`
   * with `payment_status: paid` (or, for a delayed payment method, the later
   * `checkout.session.async_payment_succeeded`) credits the session, once: Stripe redelivers.
   * `checkout.session.expired` expires it. Other event types, and sessions that are not ours, are
   * acknowledged and ignored.
   */
  async handleStripeWebhook(rawBody: Buffer, signature: string | undefined): Promise<StripeWebhookOutcome> {
    if (!this.stripe) throw new NotFoundError('Stripe is not configured on this server');
    const event = this.stripe.verifyEvent(rawBody, signature);
    const log = this.log.child({ stripeEventId: event.id, stripeEventType: event.type });
    if (!HANDLED_STRIPE_EVENTS.has(event.type)) {
      log.debug('stripe event ignored');
      return 'ignored';
    }
    const stripeSession = event.data.object as StripeCheckoutSession;
    const session = await this.em.fork().findOne(CheckoutSession, { provider: 'stripe', providerSessionId: stripeSession.id });
    if (!session) {
      log.warn({ stripeSessionId: stripeSession.id }, 'stripe event for a checkout session we do not know; ignored');
      return 'ignored';
    }
    if (event.type === 'checkout.session.expired') {
      await queries.expireSession(this.em, session.id);
      log.info({ checkoutSessionId: session.id }, 'checkout session expired at stripe');
      return 'expired';
    }
    if (event.type === 'checkout.session.async_payment_failed') {
      log.warn({ checkoutSessionId: session.id }, 'stripe delayed payment failed; not credited');
      return 'ignored';
    }
    if (stripeSession.payment_status === 'unpaid') {
      // A delayed payment method (a bank debit): `async_payment_succeeded` or `_failed` follows.
      log.info({ checkoutSessionId: session.id }, 'stripe checkout completed, payment still processing');
      return 'ignored';
    }
    const expectedCents = session.amountUsd * 100;
    if (stripeSession.payment_status !== 'paid' || stripeSession.amount_total !== expectedCents || stripeSession.currency !== 'usd') {
      log.error(
        {
          checkoutSessionId: session.id,
          paymentStatus: stripeSession.payment_status,
          amountTotal: stripeSession.amount_total,
          currency: stripeSession.currency,
          expectedCents,
        },
        'stripe checkout session completed without the payment we asked for; not credited',
      );
      return 'ignored';
    }
    // Stripe retries a delivery for days: whether the payment was in time is judged by when Stripe
    // completed the session (the event's `created`, Stripe's clock), not by when it reached us.
    const inTime = event.type === 'checkout.session.completed' ? new Date(event.created * 1000) : 'provider';
    if (await this.complete(session.id, 'stripe', inTime)) {
      log.info({ checkoutSessionId: session.id, amountUsd: session.amountUsd }, 'checkout session completed; credited');
      return 'completed';
    }
    const current = await this.checkoutSession(session.id);
    if (current.status !== 'completed') {
      log.error({ checkoutSessionId: session.id, status: current.status }, 'stripe completed a checkout session that is no longer payable; not credited');
    }
    return 'duplicate';
  }

  /** `/billing/checkout/{id}`, absolute: the local checkout page and Stripe's way back to us. */
  checkoutPageUrl(id: string): string {
    return `${this.config.publicBaseUrl}/billing/checkout/${id}`;
  }

  /** True when this call credited the session; false when it was not payable (or already paid). */
  private async complete(id: string, provider: PaymentProviderName, inTime: InTime = 'now'): Promise<boolean> {
    return this.em.fork().transactional(async (em) => {
      const credited = await queries.completeSession(em, id, provider, inTime);
      if (!credited) return false;
      await recordAudit(em, {
        // Nobody signed in completes a payment: the provider's confirmation does.
        actor: provider === 'stripe' ? 'system:stripe' : 'system:local-checkout',
        action: 'checkout_session.completed',
        targetType: 'checkout_session',
        targetId: id,
        summary: { owner_id: credited.owner_id, amount_usd: credited.amount_usd, provider },
        orgId: credited.owner_id,
      });
      return true;
    });
  }
}

/** The billing service with the provider the configuration chooses: Stripe when configured, else local. */
export function createBillingService(em: EntityManager, config: BillingConfig, log: Logger): BillingService {
  if (config.stripe) {
    const stripe = new StripePaymentProvider(config.stripe, log);
    return new BillingService(em, config, stripe, log, stripe);
  }
  log.warn('billing uses the local checkout: payments are confirmed on a page without money moving (set STRIPE_SECRET_KEY for real payments)');
  return new BillingService(em, config, new LocalPaymentProvider(), log);
}
