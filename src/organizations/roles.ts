/** A member's role in an organization, from most to least trusted. */
export type OrgRole = 'owner' | 'admin' | 'member' | 'viewer';

export const ORG_ROLES: readonly OrgRole[] = ['owner', 'admin', 'member', 'viewer'];

/**
 * What an operation may require of the caller's role in the organization it acts in (`x-org-permission`
 * in the spec). `NONE` marks an operation of the user's own (their profile, their organizations), open to any
 * signed-in user whatever organization they act in.
 */
export type OrgPermission =
  | 'NONE'
  | 'VIEW_ORGANIZATION'
  | 'READ_CONVERSATIONS'
  | 'WRITE_CONVERSATIONS'
  | 'MANAGE_OWN_KEYS'
  | 'USE_WORKSPACES'
  | 'VIEW_BILLING'
  | 'MANAGE_ORGANIZATION'
  | 'MANAGE_MEMBERS'
  | 'MANAGE_KEYS'
  | 'MANAGE_WEBHOOK_ENDPOINTS'
  | 'MANAGE_WORKSPACES'
  | 'MANAGE_BILLING'
  | 'VIEW_ORG_AUDIT_LOG'
  | 'MANAGE_OWNERS'
  | 'DELETE_ORGANIZATION';

const VIEWER: readonly OrgPermission[] = ['NONE', 'VIEW_ORGANIZATION', 'READ_CONVERSATIONS'];
const MEMBER: readonly OrgPermission[] = [...VIEWER, 'WRITE_CONVERSATIONS', 'MANAGE_OWN_KEYS', 'USE_WORKSPACES', 'VIEW_BILLING'];
const ADMIN: readonly OrgPermission[] = [
  ...MEMBER,
  'MANAGE_ORGANIZATION',
  'MANAGE_MEMBERS',
  'MANAGE_KEYS',
  'MANAGE_WEBHOOK_ENDPOINTS',
  'MANAGE_WORKSPACES',
  'MANAGE_BILLING',
  'VIEW_ORG_AUDIT_LOG',
];
const OWNER: readonly OrgPermission[] = [...ADMIN, 'MANAGE_OWNERS', 'DELETE_ORGANIZATION'];

/** The one table of who may do what in an organization (docs/organizations.md, "Roles"). */
export const ROLE_PERMISSIONS: Readonly<Record<OrgRole, ReadonlySet<OrgPermission>>> = {
  owner: new Set(OWNER),
  admin: new Set(ADMIN),
  member: new Set(MEMBER),
  viewer: new Set(VIEWER),
};

/** Whether `role` holds `permission`. */
export function roleAllows(role: OrgRole, permission: OrgPermission): boolean {
  return ROLE_PERMISSIONS[role].has(permission);
}

/** Every permission `role` holds, in the order the type lists them (for `GET /api/me` and the console). */
export function permissionsOfRole(role: OrgRole): OrgPermission[] {
  return [...ROLE_PERMISSIONS[role]];
}
