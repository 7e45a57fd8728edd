import { EntitySchema, type Opt } from '@mikro-orm/core';

export type PaymentProviderName = 'local' | 'stripe';
export type CheckoutStatus = 'pending' | 'completed' | 'cancelled' | 'expired';

/** A payment started through E4; `amountUsd` is in whole US dollars. */
export class CheckoutSession {
  id!: string;
  /** The organization that buys (docs/organizations.md). */
  ownerId!: string;
  amountUsd!: number;
  provider!: PaymentProviderName;
  /** The provider's own id of the session (Stripe's `cs_…`; our id for the local checkout). */
  providerSessionId!: string;
  /** Where the payer's browser is sent to pay. */
  redirectUrl!: string;
  status: Opt<CheckoutStatus> = 'pending';
  createdAt: Opt<Date> = new Date();
  updatedAt: Opt<Date> = new Date();
  expiresAt!: Date;
  completedAt: Date | null = null;
}

export const CheckoutSessionSchema = new EntitySchema<CheckoutSession>({
  class: CheckoutSession,
  tableName: 'checkout_sessions',
  properties: {
    id: { type: 'uuid', primary: true },
    ownerId: { type: 'uuid' },
    amountUsd: { type: 'integer' },
    provider: { type: 'string', length: 20 },
    providerSessionId: { type: 'string', length: 255 },
    redirectUrl: { type: 'text' },
    status: { type: 'string', length: 20 },
    createdAt: { type: 'Date' },
    updatedAt: { type: 'Date', onUpdate: () => new Date() },
    expiresAt: { type: 'Date' },
    completedAt: { type: 'Date', nullable: true },
  },
});
