import type { EntityManager } from '@mikro-orm/postgresql';
import { sqlRows, sqlRun } from '../db/sql.ts';

/** The live streams' SQL: stream tickets (stored hashed, so any instance redeems them). */

/** Stores a ticket's hash, clearing expired tickets as new ones are issued (there are never many). */
export async function insertTicket(
  em: EntityManager,
  ticket: { hash: string; credentialId: string; conversationId: string; expiresAt: Date },
): Promise<void> {
  await sqlRun(em, 'delete from stream_tickets where expires_at < now()');
  await sqlRun(em, 'insert into stream_tickets (ticket_hash, credential_id, conversation_id, expires_at) values ($1, $2, $3, $4)', [
    ticket.hash,
    ticket.credentialId,
    ticket.conversationId,
    ticket.expiresAt,
  ]);
}

/** Deletes the ticket and returns its conversation and principal, if it was still good (not expired, its token and user still valid). */
export async function redeemTicket(
  em: EntityManager,
  hash: string,
): Promise<{ conversation_id: string; credential_id: string; user_id: string; email: string; is_super_admin: boolean } | undefined> {
  const [row] = await sqlRows<{ conversation_id: string; credential_id: string; user_id: string; email: string; is_super_admin: boolean }>(
    em,
    `with redeemed as (
       delete from stream_tickets where ticket_hash = $1 returning credential_id, conversation_id, expires_at
     )
     select r.conversation_id, c.id as credential_id, u.id as user_id, u.email, u.is_super_admin
     from redeemed r join credentials c on c.id = r.credential_id join users u on u.id = c.user_id
     where r.expires_at > now() and c.revoked_at is null
       and (c.expires_at is null or c.expires_at > now()) and u.suspended_at is null`,
    [hash],
  );
  return row;
}
