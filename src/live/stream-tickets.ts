import { randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { UnauthenticatedError } from '../errors.ts';
import type { Principal } from '../identity/authenticator.ts';
import { hashSecret } from '../identity/secrets.ts';
import { insertTicket, redeemTicket } from './queries.ts';

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
    await insertTicket(this.em, { hash: hashSecret(ticket), credentialId: principal.credentialId, conversationId, expiresAt });
    return { ticket, expiresAt };
  }

  /**
   * Redeems a ticket (once): the principal of the access token that got it, and its conversation.
   * Unknown, used, expired, or issued by a since revoked or expired token, a suspended user, or one no longer a
   * member of the conversation's organization → 401.
   */
  async redeem(ticket: string | undefined): Promise<{ principal: Principal; conversationId: string }> {
    if (!ticket) throw new UnauthenticatedError('Missing ticket query parameter');
    const row = await redeemTicket(this.em, hashSecret(ticket));
    if (!row) throw new UnauthenticatedError('Invalid ticket: unknown, already used or expired; get a new one');
    return {
      conversationId: row.conversation_id,
      principal: {
        userId: row.user_id,
        email: row.email,
        isSuperAdmin: row.is_super_admin,
        credentialId: row.credential_id,
        credentialKind: 'access_token',
        orgId: row.org_id,
        orgRole: row.org_role,
        orgSuspended: false,
      },
    };
  }
}
