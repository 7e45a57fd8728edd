import type { OrgRole } from '../organizations/roles.ts';
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

/** A redeemed ticket: its conversation, and who acts on it in the organization that owns the conversation. */
export interface RedeemedTicket {
  conversation_id: string;
  credential_id: string;
  user_id: string;
  email: string;
  is_super_admin: boolean;
  org_id: string;
  org_role: OrgRole;
}

/** Deletes the ticket and returns its conversation and principal, if it was still good (not expired, its token and user still valid). */
export async function redeemTicket(
  em: EntityManager,
  hash: string,
): Promise<RedeemedTicket | undefined> {
  const [row] = await sqlRows<RedeemedTicket>(
    em,
    `with redeemed as (
       delete from stream_tickets where ticket_hash = $1 returning credential_id, conversation_id, expires_at
     )
     select r.conversation_id, c.id as credential_id, u.id as user_id, u.email, u.is_super_admin,
            cv.owner_id as org_id, coalesce(m.role, 'owner') as org_role
     from redeemed r join credentials c on c.id = r.credential_id join users u on u.id = c.user_id
     join conversations cv on cv.id = r.conversation_id
     join organizations o on o.id = cv.owner_id
     left join organization_members m on m.org_id = cv.owner_id and m.user_id = u.id
     where r.expires_at > now() and c.revoked_at is null
       and (c.expires_at is null or c.expires_at > now()) and u.suspended_at is null
       and o.suspended_at is null and (m.role is not null or u.is_super_admin)`,
    [hash],
  );
  return row;
}
