import { Migration } from '@mikro-orm/migrations';

/**
 * Billing: checkout sessions and the credit ledger.
 *
 * `checkout_sessions` holds every payment started through E4, whatever the provider (`local` or
 * `stripe`); `provider_session_id` is the provider's own id (Stripe's `cs_…`), unique per provider,
 * which is how a Stripe webhook finds our session.
 *
 * `credit_ledger` has one row per completed session and a primary key on the session, so a session
 * can be credited once and only once, whichever instance or request gets there first. The balance is
 * the sum of a user's rows. Completion is one statement (see `BillingService.complete`): the
 * `update … where status in ('pending', 'expired') … returning` takes the row lock, so a racing
 * second completion waits, re-reads the row as completed and updates nothing.
 */
export class Migration20261123030000_billing extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table checkout_sessions (
        id uuid primary key,
        user_id uuid not null references users (id) on delete cascade,
        amount_usd integer not null check (amount_usd > 0),
        provider varchar(20) not null check (provider in ('local', 'stripe')),
        provider_session_id varchar(255) not null,
        redirect_url text not null,
        status varchar(20) not null default 'pending'
          check (status in ('pending', 'completed', 'cancelled', 'expired')),
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        expires_at timestamptz not null,
        completed_at timestamptz,
        constraint checkout_sessions_provider_session_key unique (provider, provider_session_id),
        constraint checkout_sessions_completed_at check ((status = 'completed') = (completed_at is not null))
      );
      create index checkout_sessions_user_created_idx on checkout_sessions (user_id, created_at desc);
      create index checkout_sessions_pending_expiry_idx on checkout_sessions (expires_at) where status = 'pending';

      create table credit_ledger (
        checkout_session_id uuid primary key references checkout_sessions (id) on delete cascade,
        user_id uuid not null references users (id) on delete cascade,
        amount_usd integer not null check (amount_usd > 0),
        created_at timestamptz not null default now()
      );
      create index credit_ledger_user_idx on credit_ledger (user_id);
    `);
  }

  override async down(): Promise<void> {
    this.addSql('drop table credit_ledger; drop table checkout_sessions;');
  }
}
