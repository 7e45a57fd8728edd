import type { components } from '../../generated/openapi.ts';
import type { IssuedInvitation, Memberships } from './organization-service.ts';
import type { InvitationRow, MemberRow, MembershipRow } from './queries.ts';
import { permissionsOfRole, type OrgRole } from './roles.ts';

type Schemas = components['schemas'];

const iso = (value: Date | string): string => new Date(value).toISOString();

/** An organization with the caller's role in it. */
export function toOrganizationView(organization: MembershipRow): Schemas['Organization'] {
  return { id: organization.id, name: organization.name, personal: organization.personal, role: organization.role, created_at: iso(organization.created_at) };
}

/** A member as the organization's members see them. */
export function toMemberView(member: MemberRow): Schemas['OrganizationMember'] {
  return { user_id: member.user_id, email: member.email, role: member.role, joined_at: iso(member.created_at) };
}

/** An invitation, never its token. */
export function toInvitationView(invitation: InvitationRow): Schemas['Invitation'] {
  return {
    id: invitation.id,
    org_id: invitation.org_id,
    email: invitation.email,
    role: invitation.role,
    invited_by: invitation.invited_by,
    created_at: iso(invitation.created_at),
    expires_at: iso(invitation.expires_at),
  };
}

/** An invitation just made, with its token (this response only). */
export function toCreatedInvitationView(issued: IssuedInvitation): Schemas['CreatedInvitation'] {
  return { ...toInvitationView(issued.invitation), token: issued.token };
}

/** `GET /api/me`'s organizations: the user's, their default, and the one the request acts in with what its role allows. */
export function toMeOrganizationsView(
  memberships: Memberships,
  acting: { orgId: string; orgRole: OrgRole },
): Pick<Schemas['Me'], 'organizations' | 'default_org_id' | 'org_id' | 'org_role' | 'org_permissions'> {
  return {
    organizations: memberships.organizations.map(toOrganizationView),
    default_org_id: memberships.defaultOrgId,
    org_id: acting.orgId,
    org_role: acting.orgRole,
    org_permissions: permissionsOfRole(acting.orgRole),
  };
}
