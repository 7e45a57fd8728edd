import type { EntityManager } from '@mikro-orm/postgresql';
import { sqlRows, sqlRun } from '../db/sql.ts';

/** Billing's SQL: the one-statement completion, lazy expiry, the local checkout's cancel, the sums (sessions are entities). */

/**
 * How a completion shows that the payment was made before the session expired: `now` (the local
 * checkout: the database's clock), the time the provider completed it (a `Date`), or `provider`: the
 * provider only reports payments for sessions checked out in time (Stripe's delayed payment methods).
 */
export type InTime = 'now' | 'provider' | Date;

/**
 * Credits a session exactly once, in one statement: the update takes the row's lock, so a racing
 * completion (another request, another instance) waits, then re-reads the row as `completed` and
 * updates nothing; the ledger's primary key on the session would refuse a second row anyway.
 * `expired` is allowed as a starting point only for a payment made before `expires_at`: a Stripe
 * payment whose webhook arrives late, after the session was marked expired on a read.
 */
export async function completeSession(
  em: EntityManager,
  id: string,
  provider: string,
  inTime: InTime,
): Promise<{ checkout_session_id: string; owner_id: string; amount_usd: number } | undefined> {
  const [credited] = await sqlRows<{ checkout_session_id: string; owner_id: string; amount_usd: number }>(
    em,
    `with completed as (
       update checkout_sessions
          set status = 'completed', completed_at = now(), updated_at = now()
        where id = $1 and provider = $2 and status in ('pending', 'expired')
          ${inTime === 'now' ? 'and expires_at > now()' : inTime === 'provider' ? '' : 'and expires_at >= $3'}
        returning id, owner_id, amount_usd
     )
     insert into credit_ledger (checkout_session_id, owner_id, amount_usd)
     select id, owner_id, amount_usd from completed
     returning checkout_session_id, owner_id, amount_usd`,
    inTime instanceof Date ? [id, provider, inTime] : [id, provider],
  );
  return credited;
}

/** Marks pending sessions past their expiry as expired (lazily, when they are read): an owner's, or one by id. */
export async function expireOverdue(em: EntityManager, scope: 'owner_id' | 'id', value: string): Promise<void> {
  await sqlRun(
    em,
    `update checkout_sessions set status = 'expired', updated_at = now()
      where ${scope} = $1 and status = 'pending' and expires_at <= now()`,
    [value],
  );
}

/** What the organization bought (whole dollars) and spent (micro-dollars), as text, of one moment. */
export async function creditSums(em: EntityManager, ownerId: string): Promise<{ purchased: string; spent: string }> {
  const [sums] = await sqlRows<{ purchased: string; spent: string }>(
    em,
    `select (select coalesce(sum(amount_usd), 0) from credit_ledger where owner_id = $1)::text as purchased,
            coalesce((select spent_micro_usd from spend_totals where owner_id = $1), 0)::text as spent`,
    [ownerId],
  );
  return sums!;
}

/** A pending local session, not yet expired, becomes cancelled; false when it was not. */
export async function cancelLocalSession(em: EntityManager, id: string): Promise<boolean> {
  return (
    (await sqlRun(
      em,
      "update checkout_sessions set status = 'cancelled', updated_at = now() where id = $1 and provider = 'local' and status = 'pending' and expires_at > now()",
      [id],
    )) > 0
  );
}

/** Stripe expired the session: a pending one becomes expired. */
export async function expireSession(em: EntityManager, id: string): Promise<void> {
  await sqlRun(em, "update checkout_sessions set status = 'expired', updated_at = now() where id = $1 and status = 'pending'", [id]);
}
