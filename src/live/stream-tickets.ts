import { randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { UnauthenticatedError } from '../errors.ts';
import type { Principal } from '../identity/authenticator.ts';
import { hashSecret } from '../identity/secrets.ts';

/** Prefix of stream tickets, so a leaked one is recognisable (and never mistaken for a token). */
const TICKET_PREFIX = 'apst_';

/**
 * Short-lived, single-use tickets for `GET …/events/stream?ticket=…`: browsers' EventSource cannot
 * send `X-Access-Token`, and an access token in a URL would end up in proxy and browser logs. A
 * ticket is issued to the holder of an access token for one conversation, stored hashed, and
 * deleted when redeemed (on any instance: they live in the database).
 */
export class StreamTickets {
  constructor(
    private readonly em: EntityManager,
    private readonly ttlMs: number,
  ) {}

  /** Issues a ticket for `conversationId`, whose ownership the caller has checked. */
  async issue(principal: Principal, conversationId: string): Promise<{ ticket: string; expiresAt: Date }> {
    const ticket = TICKET_PREFIX + randomBytes(32).toString('base64url');
    const expiresAt = new Date(Date.now() + this.ttlMs);
    const connection = this.em.getConnection();
    // Expired tickets are cleared as new ones are issued; there are never many.
    await connection.execute('delete from stream_tickets where expires_at < now()');
    await connection.execute(
      'insert into stream_tickets (ticket_hash, credential_id, conversation_id, expires_at) values (?, ?, ?, ?)',
      [hashSecret(ticket), principal.credentialId, conversationId, expiresAt],
    );
    return { ticket, expiresAt };
  }

  /**
   * Redeems a ticket (once): the principal of the access token that got it, and its conversation.
   * Unknown, used, expired, or issued by a since revoked or expired token or a suspended user → 401.
   */
  async redeem(ticket: string | undefined): Promise<{ principal: Principal; conversationId: string }> {
    if (!ticket) throw new UnauthenticatedError('Missing ticket query parameter');
    const rows = await this.em.getConnection().execute<
      { conversation_id: string; credential_id: string; user_id: string; email: string; is_super_admin: boolean }[]
    >(
      `with redeemed as (
         delete from stream_tickets where ticket_hash = ? returning credential_id, conversation_id, expires_at
       )
       select r.conversation_id, c.id as credential_id, u.id as user_id, u.email, u.is_super_admin
       from redeemed r join credentials c on c.id = r.credential_id join users u on u.id = c.user_id
       where r.expires_at > now() and c.revoked_at is null
         and (c.expires_at is null or c.expires_at > now()) and u.suspended_at is null`,
      [hashSecret(ticket)],
    );
    const row = rows[0];
    if (!row) throw new UnauthenticatedError('Invalid ticket: unknown, already used or expired; get a new one');
    return {
      conversationId: row.conversation_id,
      principal: {
        userId: row.user_id,
        email: row.email,
        isSuperAdmin: row.is_super_admin,
        credentialId: row.credential_id,
        credentialKind: 'access_token',
      },
    };
  }
}
