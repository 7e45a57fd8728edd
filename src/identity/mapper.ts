import type { components } from '../../generated/openapi.ts';
import { permissionsOf } from './authenticator.ts';
import type { Credential, User } from './entities.ts';
import type { IssuedKey, UserSummary } from './identity-service.ts';

type Schemas = components['schemas'];

/** The API's view of a super admin. */
export function toSuperAdminView(user: User): Schemas['SuperAdmin'] {
  return { user_id: user.id, email: user.email };
}

/** What `GET /api/me` says of the organizations (see `toMeOrganizationsView`). */
type MeOrganizationFields = 'organizations' | 'default_org_id' | 'org_id' | 'org_role' | 'org_permissions';

/** The caller's account (`GET /api/me`), without its organizations. */
export function toMeView(user: User): Omit<Schemas['Me'], MeOrganizationFields> {
  return {
    user_id: user.id,
    email: user.email,
    is_super_admin: user.isSuperAdmin,
    permissions: permissionsOf(user),
    suspended: user.suspendedAt !== null,
    created_at: user.createdAt.toISOString(),
  };
}

/** A key as its owner sees it: never the secret or its hash. */
export function toKeyView(credential: Credential): Schemas['Key'] {
  return {
    id: credential.id,
    kind: credential.kind,
    name: credential.name,
    prefix: credential.prefix,
    created_at: credential.createdAt.toISOString(),
    last_used_at: credential.lastUsedAt?.toISOString() ?? null,
    expires_at: credential.expiresAt?.toISOString() ?? null,
  };
}

/** A session API key as its organization's admins see it: with the member who made it. */
export function toOrgKeyView(credential: Credential): Schemas['OrgKey'] {
  return { ...toKeyView(credential), user_id: credential.user.id, email: credential.user.email };
}

/** A key just issued, with its secret (this response only). */
export function toCreatedKeyView(issued: IssuedKey): Schemas['CreatedKey'] {
  return { ...toKeyView(issued.credential), secret: issued.secret };
}

/** A user as administrators see them. */
export function toAdminUserView(user: UserSummary): Schemas['AdminUser'] {
  return {
    user_id: user.userId,
    email: user.email,
    is_super_admin: user.isSuperAdmin,
    suspended: user.suspended,
    created_at: user.createdAt.toISOString(),
    active_access_tokens: user.activeAccessTokens,
    active_session_api_keys: user.activeSessionApiKeys,
    last_used_at: user.lastUsedAt?.toISOString() ?? null,
  };
}
