import { randomBytes, randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../../generated/openapi.ts';
import { recordAudit } from '../audit/audit-service.ts';
import type { ConversationService, EventPageRequest } from '../conversations/conversation-service.ts';
import { toConversationView } from '../conversations/mapper.ts';
import { conversationViewRow } from '../conversations/queries.ts';
import { ConflictError, ForbiddenError, InvalidInputError, NotFoundError } from '../errors.ts';
import type { Principal } from '../identity/authenticator.ts';
import { hashSecret } from '../identity/secrets.ts';
import { canonicalUuid } from '../uuid.ts';
import { toShareLinkView, toSharedConversation } from './mapper.ts';
import * as queries from './queries.ts';
import { redactSharedPayload, SHOWN_KINDS } from './visibility.ts';

type ShareLink = components['schemas']['ShareLink'];
type ShareLinkCreate = components['schemas']['ShareLinkCreate'];
type SharedConversation = components['schemas']['SharedConversation'];

/** `apsh_` and 256 random bits (base64url), as the access tokens are made. */
const TOKEN_PATTERN = /^apsh_[A-Za-z0-9_-]{43}$/;
const TOKEN_HINT_LENGTH = 9;
const MAX_ACTIVE_LINKS = 20;
const LISTED_LINKS = 100;
const MAX_LIFETIME_MS = 366 * 86_400_000;

/**
 * Share links: the owner creates, lists and revokes them (each change audited in its transaction);
 * anyone holding one reads the conversation through `SHOWN_KINDS` and `redactSharedPayload`.
 */
export class ShareService {
  constructor(
    private readonly em: EntityManager,
    private readonly conversations: ConversationService,
    private readonly options: { enabled: boolean; publicBaseUrl: string },
  ) {}

  /** A new link to the caller's conversation; its token is in `url`, here and never again. */
  async create(principal: Principal, conversationId: string, request: ShareLinkCreate): Promise<ShareLink> {
    if (!this.options.enabled) throw new ForbiddenError('Sharing is switched off on this server (SHARING_ENABLED=false)');
    const id = canonicalUuid(conversationId);
    const token = `apsh_${randomBytes(32).toString('base64url')}`;
    const row = await this.em.fork().transactional(async (em) => {
      // Locked: two creations at once cannot both pass the cap.
      if ((await queries.lockConversationOwner(em, id)) !== principal.orgId) throw conversationNotFound();
      // After the owner check: someone else's conversation answers 404 whatever the body.
      const expiresAt = expiryOf(request.expires_at ?? null);
      if ((await queries.activeLinkCount(em, id)) >= MAX_ACTIVE_LINKS) {
        throw new ConflictError(`A conversation may have at most ${MAX_ACTIVE_LINKS} active share links; revoke one first`);
      }
      const link = await queries.insertShareLink(em, {
        id: randomUUID(),
        conversationId: id,
        tokenHash: hashSecret(token),
        tokenHint: token.slice(0, TOKEN_HINT_LENGTH),
        createdBy: principal.userId,
        shareTags: request.share_tags ?? false,
        expiresAt,
      });
      await recordAudit(em, {
        actor: principal.userId,
        action: 'share_link.created',
        targetType: 'share_link',
        targetId: link.id,
        summary: { conversation_id: id, expires_at: expiresAt?.toISOString() ?? null, share_tags: link.share_tags },
        orgId: principal.orgId,
      });
      return link;
    });
    return toShareLinkView(row, `${this.options.publicBaseUrl}/share/${token}`);
  }

  /** The caller's conversation's links (working ones first). */
  async list(principal: Principal, conversationId: string): Promise<ShareLink[]> {
    const id = canonicalUuid(conversationId);
    if ((await queries.conversationOwnerId(this.em, id)) !== principal.orgId) throw conversationNotFound();
    return (await queries.shareLinks(this.em, id, LISTED_LINKS)).map((row) => toShareLinkView(row));
  }

  /** Revokes a link of the caller's conversation at once; revoking it again changes nothing (and audits nothing). */
  async revoke(principal: Principal, conversationId: string, linkId: string): Promise<ShareLink> {
    const id = canonicalUuid(conversationId);
    const result = await this.em.fork().transactional(async (em) => {
      if ((await queries.conversationOwnerId(em, id)) !== principal.orgId) throw conversationNotFound();
      const revoked = await queries.revokeShareLink(em, id, linkId);
      if (!revoked) throw new NotFoundError('Share link not found');
      if (revoked.revoked) {
        await recordAudit(em, { actor: principal.userId, action: 'share_link.revoked', targetType: 'share_link', targetId: linkId, summary: { conversation_id: id }, orgId: principal.orgId });
      }
      return revoked.link;
    });
    return toShareLinkView(result);
  }

  /** Whether `token` opens a conversation now (the page's 200 or 404). */
  async opens(token: string): Promise<boolean> {
    return (await this.workingLink(token)) !== undefined;
  }

  /** The conversation behind a working link, as it shows it. */
  async sharedConversation(token: string): Promise<SharedConversation> {
    const link = await this.requireWorkingLink(token);
    const row = await conversationViewRow(this.em, link.conversation_id);
    if (!row) throw sharedNotFound();
    return toSharedConversation(toConversationView(row, [], null), link);
  }

  /** A page of the events a working link shows, as the bytes of an `EventPage`. */
  async sharedEvents(token: string, page: EventPageRequest): Promise<Buffer> {
    const link = await this.requireWorkingLink(token);
    return this.conversations.listVisibleEvents(link.conversation_id, page, { kinds: SHOWN_KINDS, redact: redactSharedPayload });
  }

  private async requireWorkingLink(token: string): Promise<NonNullable<Awaited<ReturnType<typeof queries.workingLinkByTokenHash>>>> {
    const link = await this.workingLink(token);
    if (!link) throw sharedNotFound();
    return link;
  }

  private workingLink(token: string): ReturnType<typeof queries.workingLinkByTokenHash> {
    if (!this.options.enabled || !TOKEN_PATTERN.test(token)) return Promise.resolve(undefined);
    return queries.workingLinkByTokenHash(this.em, hashSecret(token));
  }
}

/** Someone else's conversation answers as an unknown one: ids cannot be probed. */
function conversationNotFound(): NotFoundError {
  return new NotFoundError('Conversation not found');
}

/** One answer for revoked, expired, unknown and switched off. */
function sharedNotFound(): NotFoundError {
  return new NotFoundError('This share link does not exist, has expired or was revoked');
}

/** A requested expiry: in the future and within `MAX_LIFETIME_MS`, else a 422 naming it. */
function expiryOf(value: string | null): Date | null {
  if (value === null) return null;
  const at = new Date(value);
  const now = Date.now();
  if (!(at.getTime() > now)) throw new InvalidInputError('expires_at must be in the future', ['body', 'expires_at'], 'value_error', value);
  if (at.getTime() > now + MAX_LIFETIME_MS) {
    throw new InvalidInputError('expires_at must be at most 366 days from now', ['body', 'expires_at'], 'value_error', value);
  }
  return at;
}
