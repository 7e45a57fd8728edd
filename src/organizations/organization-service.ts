import { randomBytes, randomUUID } from 'node:crypto';
import { ForeignKeyConstraintViolationException, UniqueConstraintViolationException, type EntityManager } from '@mikro-orm/postgresql';
import { recordAudit } from '../audit/audit-service.ts';
import { ConflictError, ForbiddenError, InvalidInputError, NotFoundError } from '../errors.ts';
import { normalizeEmail } from '../identity/identity-service.ts';
import { hashSecret } from '../identity/secrets.ts';
import * as queries from './queries.ts';
import type { InvitationRow, MemberRow, MembershipRow, OrganizationRow } from './queries.ts';
import { roleAllows, type OrgRole } from './roles.ts';

const DAY_MS = 86_400_000;
/** An invitation token's prefix tells a reader what it is, as keys' and share links' do. */
const INVITATION_TOKEN_PREFIX = 'apin_';

/** Who acts, and where: the parts of a `Principal` the rules need. */
export interface OrgActor {
  readonly userId: string;
  readonly email: string;
  /** The organization the request acts in (the path's `org_id` for operations under `/api/orgs/{org_id}`). */
  readonly orgId: string;
  readonly orgRole: OrgRole;
}

/** An invitation just made, with its token (shown this once, stored as a hash). */
export interface IssuedInvitation {
  invitation: InvitationRow;
  token: string;
}

/** A user's organizations and where they act by default. */
export interface Memberships {
  organizations: MembershipRow[];
  defaultOrgId: string;
}

/**
 * Organizations, their members and invitations (docs/organizations.md). Whether the caller may call an
 * operation at all is decided before (`x-org-permission`, checked once); what depends on the target (an
 * owner's role, leaving, the last owner) is decided here. Each change is one transaction with its audit row.
 */
export class OrganizationService {
  constructor(
    private readonly em: EntityManager,
    private readonly invitationTtlDays: number,
  ) {}

  /** The user's organizations with their role, the personal one first, and their default. */
  async membershipsOf(userId: string): Promise<Memberships> {
    const em = this.em.fork();
    const [organizations, fallback] = await Promise.all([queries.membershipsOf(em, userId), queries.defaultMembership(em, userId)]);
    return { organizations, defaultOrgId: fallback.orgId };
  }

  /** Creates an organization whose owner is the actor. */
  async create(actor: OrgActor, name: string): Promise<MembershipRow> {
    const trimmed = nameOf(name);
    return this.em.fork().transactional(async (em) => {
      const organization = await queries.insertOrganization(em, randomUUID(), trimmed, actor.userId);
      await recordAudit(em, { actor: actor.userId, action: 'organization.created', targetType: 'organization', targetId: organization.id, summary: { org_id: organization.id, name: trimmed } });
      return { ...organization, role: 'owner' };
    });
  }

  /** The organization the actor acts in, with their role. */
  async get(actor: OrgActor): Promise<MembershipRow> {
    return { ...(await this.organizationOf(this.em.fork(), actor.orgId)), role: actor.orgRole };
  }

  /** Renames the organization the actor acts in. */
  async rename(actor: OrgActor, name: string): Promise<MembershipRow> {
    const trimmed = nameOf(name);
    return this.em.fork().transactional(async (em) => {
      const organization = await this.organizationOf(em, actor.orgId, true);
      if (organization.name === trimmed) return { ...organization, role: actor.orgRole };
      await queries.renameOrganization(em, organization.id, trimmed);
      await recordAudit(em, { actor: actor.userId, action: 'organization.updated', targetType: 'organization', targetId: organization.id, summary: { org_id: organization.id, name: trimmed, previous_name: organization.name } });
      return { ...organization, name: trimmed, role: actor.orgRole };
    });
  }

  /** Deletes the organization the actor acts in: never a personal one, nor one holding conversations. */
  async delete(actor: OrgActor): Promise<void> {
    try {
      await this.em.fork().transactional(async (em) => {
        const organization = await this.organizationOf(em, actor.orgId, true);
        if (organization.personal) throw new ConflictError('A personal organization cannot be deleted');
        const conversations = await queries.conversationCount(em, organization.id);
        if (conversations > 0) throw holdsConversations(conversations);
        await recordAudit(em, { actor: actor.userId, action: 'organization.deleted', targetType: 'organization', targetId: organization.id, summary: { org_id: organization.id, name: organization.name } });
        await queries.deleteOrganization(em, organization.id);
      });
    } catch (error) {
      // A conversation stored meanwhile: its foreign key refuses the delete.
      if (error instanceof ForeignKeyConstraintViolationException) throw holdsConversations(1);
      throw error;
    }
  }

  /** The members of the organization the actor acts in. */
  async members(actor: OrgActor): Promise<MemberRow[]> {
    return queries.membersOf(this.em.fork(), actor.orgId);
  }

  /** Gives a member another role; only an owner makes or unmakes an owner, and the last owner stays one. */
  async changeRole(actor: OrgActor, userId: string, role: OrgRole): Promise<MemberRow> {
    return this.em.fork().transactional(async (em) => {
      await this.organizationOf(em, actor.orgId, true);
      const member = await memberOrNotFound(em, actor.orgId, userId);
      if ((member.role === 'owner' || role === 'owner') && !roleAllows(actor.orgRole, 'MANAGE_OWNERS')) {
        throw new ForbiddenError("Only an owner may make someone an owner or change an owner's role");
      }
      if (member.role === role) return member;
      if (member.role === 'owner') await refuseLastOwner(em, actor.orgId, member);
      await queries.setMemberRole(em, actor.orgId, userId, role);
      await recordAudit(em, {
        actor: actor.userId,
        action: 'organization_member.role_changed',
        targetType: 'user',
        targetId: userId,
        summary: { org_id: actor.orgId, email: member.email, role, previous_role: member.role },
      });
      return { ...member, role };
    });
  }

  /** Removes a member: anyone may leave; removing another needs MANAGE_MEMBERS, an owner MANAGE_OWNERS; never the last owner. */
  async removeMember(actor: OrgActor, userId: string): Promise<void> {
    const leaving = userId === actor.userId;
    if (!leaving && !roleAllows(actor.orgRole, 'MANAGE_MEMBERS')) {
      throw new ForbiddenError(`Your role in this organization (${actor.orgRole}) does not allow removing other members (MANAGE_MEMBERS)`);
    }
    await this.em.fork().transactional(async (em) => {
      await this.organizationOf(em, actor.orgId, true);
      const member = await memberOrNotFound(em, actor.orgId, userId);
      if (member.role === 'owner' && !leaving && !roleAllows(actor.orgRole, 'MANAGE_OWNERS')) {
        throw new ForbiddenError('Only an owner may remove an owner');
      }
      if (member.role === 'owner') await refuseLastOwner(em, actor.orgId, member);
      await queries.deleteMember(em, actor.orgId, userId);
      await recordAudit(em, {
        actor: actor.userId,
        action: 'organization_member.removed',
        targetType: 'user',
        targetId: userId,
        summary: { org_id: actor.orgId, email: member.email, role: member.role, left: leaving },
      });
    });
  }

  /** Invites an e-mail address with a role; the token is returned here and never again. */
  async invite(actor: OrgActor, email: string, role: OrgRole): Promise<IssuedInvitation> {
    const address = normalizeEmail(email, ['body', 'email']);
    if (role === 'owner' && !roleAllows(actor.orgRole, 'MANAGE_OWNERS')) throw new ForbiddenError('Only an owner may invite an owner');
    try {
      return await this.em.fork().transactional(async (em) => {
        const organization = await this.organizationOf(em, actor.orgId, true);
        if (organization.personal) {
          throw new ConflictError('A personal organization takes no other members; create an organization to invite people to');
        }
        if (await queries.memberOf(em, organization.id, { email: address })) throw new ConflictError(`${address} is already a member of this organization`);
        const open = await queries.openInvitationFor(em, organization.id, address);
        if (open && new Date(open.expires_at).valueOf() > Date.now()) {
          throw new ConflictError(`${address} already has a pending invitation to this organization; revoke it first`);
        }
        // An expired one gives way to the new one (one open invitation per address).
        if (open) await queries.revokeInvitation(em, organization.id, open.id);
        const token = INVITATION_TOKEN_PREFIX + randomBytes(32).toString('base64url');
        const invitation = await queries.insertInvitation(em, {
          id: randomUUID(),
          orgId: organization.id,
          email: address,
          role,
          tokenHash: hashSecret(token),
          invitedBy: actor.userId,
          expiresAt: new Date(Date.now() + this.invitationTtlDays * DAY_MS),
        });
        await recordAudit(em, {
          actor: actor.userId,
          action: 'organization_invitation.created',
          targetType: 'organization_invitation',
          targetId: invitation.id,
          summary: { org_id: organization.id, email: address, role, expires_at: new Date(invitation.expires_at).toISOString() },
        });
        return { invitation, token };
      });
    } catch (error) {
      // Two invitations of the same address at once: the partial unique index lets one through.
      if (error instanceof UniqueConstraintViolationException) {
        throw new ConflictError(`${address} already has a pending invitation to this organization; revoke it first`);
      }
      throw error;
    }
  }

  /** The invitations of the organization the actor acts in that can still be accepted. */
  async pendingInvitations(actor: OrgActor): Promise<InvitationRow[]> {
    return queries.pendingInvitations(this.em.fork(), actor.orgId);
  }

  /** Revokes an open invitation of the organization the actor acts in. */
  async revokeInvitation(actor: OrgActor, invitationId: string): Promise<void> {
    await this.em.fork().transactional(async (em) => {
      const invitation = await queries.revokeInvitation(em, actor.orgId, invitationId);
      if (!invitation) throw new NotFoundError('No pending invitation of this organization has this id');
      await recordAudit(em, {
        actor: actor.userId,
        action: 'organization_invitation.revoked',
        targetType: 'organization_invitation',
        targetId: invitation.id,
        summary: { org_id: actor.orgId, email: invitation.email, role: invitation.role },
      });
    });
  }

  /** The actor joins the organization of the invitation `token` names, if it was sent to their e-mail and is still open. */
  async accept(actor: OrgActor, token: string): Promise<MembershipRow> {
    return this.em.fork().transactional(async (em) => {
      const invitation = await queries.invitationByTokenHash(em, hashSecret(token));
      if (!invitation) throw new NotFoundError('No invitation has this token; check the link you were given');
      if (invitation.email !== actor.email.toLowerCase()) {
        throw new ForbiddenError('This invitation is for another e-mail address; sign in as the person it was sent to');
      }
      const organization = await this.organizationOf(em, invitation.org_id);
      if (invitation.accepted_by === actor.userId) {
        const member = await queries.memberOf(em, organization.id, { userId: actor.userId });
        if (member) return { ...organization, role: member.role };
      }
      if (invitation.revoked_at) throw new ConflictError('This invitation was revoked; ask for a new one');
      if (invitation.accepted_at) throw new ConflictError('This invitation was already accepted');
      const expiresAt = new Date(invitation.expires_at);
      if (expiresAt.valueOf() <= Date.now()) throw new ConflictError(`This invitation expired at ${expiresAt.toISOString()}; ask for a new one`);
      const role = await queries.addMember(em, organization.id, actor.userId, invitation.role);
      await queries.markInvitationAccepted(em, invitation.id, actor.userId);
      await recordAudit(em, {
        actor: actor.userId,
        action: 'organization_invitation.accepted',
        targetType: 'organization_invitation',
        targetId: invitation.id,
        summary: { org_id: organization.id, email: invitation.email, role },
      });
      return { ...organization, role };
    });
  }

  /** Sets where the user acts without `X-Org-Id`: an organization they are a member of, or null for their personal one. */
  async setDefault(userId: string, orgId: string | null): Promise<void> {
    const target = orgId === userId ? null : orgId;
    await this.em.fork().transactional(async (em) => {
      if (target !== null && !(await queries.memberOf(em, target, { userId }))) {
        throw new InvalidInputError('You are not a member of this organization', ['body', 'default_org_id'], 'value_error', orgId);
      }
      await queries.setDefaultOrganization(em, userId, target);
      await recordAudit(em, { actor: userId, action: 'user.default_org_changed', targetType: 'user', targetId: userId, summary: { org_id: target ?? userId } });
    });
  }

  private async organizationOf(em: EntityManager, orgId: string, lock = false): Promise<OrganizationRow> {
    const organization = await queries.organizationById(em, orgId, lock);
    // Deleted between the scope check and here.
    if (!organization) throw new NotFoundError('Organization not found');
    return organization;
  }
}

function nameOf(name: string): string {
  const trimmed = name.trim();
  if (!trimmed) throw new InvalidInputError('The name must not be blank', ['body', 'name'], 'value_error', name);
  return trimmed;
}

function holdsConversations(count: number): ConflictError {
  return new ConflictError(`This organization holds ${count} conversation${count === 1 ? '' : 's'}; it can only be deleted when it holds none`);
}

async function memberOrNotFound(em: EntityManager, orgId: string, userId: string): Promise<MemberRow> {
  const member = await queries.memberOf(em, orgId, { userId });
  if (!member) throw new NotFoundError('No member of this organization has this id');
  return member;
}

/** Refuses (409) to take the owner role from the organization's only owner. */
async function refuseLastOwner(em: EntityManager, orgId: string, owner: MemberRow): Promise<void> {
  if ((await queries.ownerCount(em, orgId)) <= 1) {
    throw new ConflictError(`${owner.email} is this organization's last owner; make another member owner first`);
  }
}
