import type { EntityManager } from '@mikro-orm/postgresql';
import { sqlRows, sqlRun } from '../db/sql.ts';
import type { OrgRole } from './roles.ts';

/** A user's place in one organization. */
export interface Membership {
  readonly orgId: string;
  readonly role: OrgRole;
  readonly suspended: boolean;
}

/**
 * The user's role in `orgId` and whether it is suspended; undefined when they are not a member or it does not
 * exist. A super admin who is not a member acts there as an owner.
 */
export async function membershipOf(em: EntityManager, userId: string, orgId: string, isSuperAdmin: boolean): Promise<Membership | undefined> {
  const [row] = await sqlRows<{ role: OrgRole | null; suspended: boolean }>(
    em,
    `select m.role, o.suspended_at is not null as suspended
       from organizations o left join organization_members m on m.org_id = o.id and m.user_id = $2
      where o.id = $1`,
    [orgId, userId],
  );
  if (!row || (!row.role && !isSuperAdmin)) return undefined;
  return { orgId, role: row.role ?? 'owner', suspended: row.suspended };
}

/** Where a user acts without `X-Org-Id`: their chosen default organization while they belong to it, else their personal one. */
export async function defaultMembership(em: EntityManager, userId: string): Promise<Membership> {
  const [row] = await sqlRows<{ org_id: string; role: OrgRole; suspended: boolean }>(
    em,
    `select m.org_id, m.role, o.suspended_at is not null as suspended
       from users u
       join organization_members m on m.user_id = u.id and m.org_id in (coalesce(u.default_org_id, u.id), u.id)
       join organizations o on o.id = m.org_id
      where u.id = $1
      order by m.org_id = coalesce(u.default_org_id, u.id) desc
      limit 1`,
    [userId],
  );
  // Every user has a personal organization (a trigger makes it with the user).
  return row ? { orgId: row.org_id, role: row.role, suspended: row.suspended } : { orgId: userId, role: 'owner', suspended: false };
}

/** An organization as stored. */
export interface OrganizationRow {
  id: string;
  name: string;
  personal: boolean;
  created_at: Date;
}

/** An organization with a user's role in it. */
export interface MembershipRow extends OrganizationRow {
  role: OrgRole;
}

/** A member with the e-mail of their account. */
export interface MemberRow {
  user_id: string;
  email: string;
  role: OrgRole;
  created_at: Date;
}

/** An invitation as stored (its token only as a hash). */
export interface InvitationRow {
  id: string;
  org_id: string;
  email: string;
  role: OrgRole;
  invited_by: string | null;
  created_at: Date;
  expires_at: Date;
  accepted_at: Date | null;
  accepted_by: string | null;
  revoked_at: Date | null;
}

const INVITATION_COLUMNS = 'id, org_id, email, role, invited_by, created_at, expires_at, accepted_at, accepted_by, revoked_at';

/** The user's organizations with their role: the personal one first, then by name. */
export async function membershipsOf(em: EntityManager, userId: string): Promise<MembershipRow[]> {
  return sqlRows<MembershipRow>(
    em,
    `select o.id, o.name, o.personal, o.created_at, m.role
       from organization_members m join organizations o on o.id = m.org_id
      where m.user_id = $1
      order by o.id = $1 desc, lower(o.name), o.id`,
    [userId],
  );
}

/** One organization; `lock` holds its row until the transaction ends (serialises membership changes). */
export async function organizationById(em: EntityManager, orgId: string, lock = false): Promise<OrganizationRow | undefined> {
  const [row] = await sqlRows<OrganizationRow>(em, `select id, name, personal, created_at from organizations where id = $1${lock ? ' for update' : ''}`, [orgId]);
  return row;
}

/** Stores a new organization with `ownerId` as its owner. */
export async function insertOrganization(em: EntityManager, orgId: string, name: string, ownerId: string): Promise<OrganizationRow> {
  const [row] = await sqlRows<OrganizationRow>(
    em,
    `with o as (insert into organizations (id, name) values ($1, $2) returning id, name, personal, created_at),
          m as (insert into organization_members (org_id, user_id, role, created_at) select id, $3, 'owner', created_at from o)
     select * from o`,
    [orgId, name, ownerId],
  );
  return row!;
}

/** Renames an organization. */
export async function renameOrganization(em: EntityManager, orgId: string, name: string): Promise<void> {
  await sqlRun(em, 'update organizations set name = $2, updated_at = now() where id = $1', [orgId, name]);
}

/** Deletes an organization and, by its foreign keys, what belongs to it (not conversations: they restrict it). */
export async function deleteOrganization(em: EntityManager, orgId: string): Promise<void> {
  await sqlRun(em, 'delete from organizations where id = $1', [orgId]);
}

/** How many conversations an organization owns. */
export async function conversationCount(em: EntityManager, orgId: string): Promise<number> {
  const [row] = await sqlRows<{ count: string }>(em, 'select count(*) as count from conversations where owner_id = $1', [orgId]);
  return Number(row?.count ?? 0);
}

/** An organization's members: owners first, then by e-mail. */
export async function membersOf(em: EntityManager, orgId: string): Promise<MemberRow[]> {
  return sqlRows<MemberRow>(
    em,
    `select m.user_id, u.email, m.role, m.created_at
       from organization_members m join users u on u.id = m.user_id
      where m.org_id = $1
      order by m.role = 'owner' desc, u.email, m.user_id`,
    [orgId],
  );
}

/** One member, by user id or e-mail. */
export async function memberOf(em: EntityManager, orgId: string, ref: { userId: string } | { email: string }): Promise<MemberRow | undefined> {
  const [row] = await sqlRows<MemberRow>(
    em,
    `select m.user_id, u.email, m.role, m.created_at
       from organization_members m join users u on u.id = m.user_id
      where m.org_id = $1 and ${'userId' in ref ? 'm.user_id = $2' : 'u.email = $2'}`,
    [orgId, 'userId' in ref ? ref.userId : ref.email],
  );
  return row;
}

/** How many owners an organization has. */
export async function ownerCount(em: EntityManager, orgId: string): Promise<number> {
  const [row] = await sqlRows<{ count: string }>(em, `select count(*) as count from organization_members where org_id = $1 and role = 'owner'`, [orgId]);
  return Number(row?.count ?? 0);
}

/** Gives a member another role. */
export async function setMemberRole(em: EntityManager, orgId: string, userId: string, role: OrgRole): Promise<void> {
  await sqlRun(em, 'update organization_members set role = $3 where org_id = $1 and user_id = $2', [orgId, userId, role]);
}

/** Takes a member out of an organization. */
export async function deleteMember(em: EntityManager, orgId: string, userId: string): Promise<void> {
  await sqlRun(em, 'delete from organization_members where org_id = $1 and user_id = $2', [orgId, userId]);
}

/** Makes a user a member with `role`, unless they are one already; answers their role. */
export async function addMember(em: EntityManager, orgId: string, userId: string, role: OrgRole): Promise<OrgRole> {
  await sqlRun(em, 'insert into organization_members (org_id, user_id, role) values ($1, $2, $3) on conflict do nothing', [orgId, userId, role]);
  const [row] = await sqlRows<{ role: OrgRole }>(em, 'select role from organization_members where org_id = $1 and user_id = $2', [orgId, userId]);
  return row!.role;
}

/** Stores an invitation. */
export async function insertInvitation(
  em: EntityManager,
  invitation: { id: string; orgId: string; email: string; role: OrgRole; tokenHash: string; invitedBy: string; expiresAt: Date },
): Promise<InvitationRow> {
  const [row] = await sqlRows<InvitationRow>(
    em,
    `insert into organization_invitations (id, org_id, email, role, token_hash, invited_by, expires_at)
     values ($1, $2, $3, $4, $5, $6, $7) returning ${INVITATION_COLUMNS}`,
    [invitation.id, invitation.orgId, invitation.email, invitation.role, invitation.tokenHash, invitation.invitedBy, invitation.expiresAt],
  );
  return row!;
}

/** The invitation to `email` that is neither accepted nor revoked (expired or not). */
export async function openInvitationFor(em: EntityManager, orgId: string, email: string): Promise<InvitationRow | undefined> {
  const [row] = await sqlRows<InvitationRow>(
    em,
    `select ${INVITATION_COLUMNS} from organization_invitations
      where org_id = $1 and email = $2 and accepted_at is null and revoked_at is null`,
    [orgId, email],
  );
  return row;
}

/** An organization's invitations that can still be accepted, newest first. */
export async function pendingInvitations(em: EntityManager, orgId: string): Promise<InvitationRow[]> {
  return sqlRows<InvitationRow>(
    em,
    `select ${INVITATION_COLUMNS} from organization_invitations
      where org_id = $1 and accepted_at is null and revoked_at is null and expires_at > now()
      order by created_at desc, id`,
    [orgId],
  );
}

/** The invitation a token's hash names, locked until the transaction ends. */
export async function invitationByTokenHash(em: EntityManager, tokenHash: string): Promise<InvitationRow | undefined> {
  const [row] = await sqlRows<InvitationRow>(em, `select ${INVITATION_COLUMNS} from organization_invitations where token_hash = $1 for update`, [tokenHash]);
  return row;
}

/** Revokes one of an organization's open invitations; undefined when there is none with this id. */
export async function revokeInvitation(em: EntityManager, orgId: string, invitationId: string): Promise<InvitationRow | undefined> {
  const [row] = await sqlRows<InvitationRow>(
    em,
    `update organization_invitations set revoked_at = now()
      where id = $1 and org_id = $2 and accepted_at is null and revoked_at is null
      returning ${INVITATION_COLUMNS}`,
    [invitationId, orgId],
  );
  return row;
}

/** Records who accepted an invitation. */
export async function markInvitationAccepted(em: EntityManager, invitationId: string, userId: string): Promise<void> {
  await sqlRun(em, 'update organization_invitations set accepted_at = now(), accepted_by = $2 where id = $1', [invitationId, userId]);
}

/** Sets where a user acts without `X-Org-Id` (null: their personal organization). */
export async function setDefaultOrganization(em: EntityManager, userId: string, orgId: string | null): Promise<void> {
  await sqlRun(em, 'update users set default_org_id = $2 where id = $1', [userId, orgId]);
}
