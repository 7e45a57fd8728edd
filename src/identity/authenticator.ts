import type { EntityManager } from '@mikro-orm/postgresql';
import { ForbiddenError, UnauthenticatedError } from '../errors.ts';
import { defaultMembership, membershipOf, type Membership } from '../organizations/queries.ts';
import type { OrgRole } from '../organizations/roles.ts';
import { Credential, type CredentialKind } from './entities.ts';
import { hashSecret, sameHash } from './secrets.ts';
import { touchCredential, validCallers } from './queries.ts';

/** Who is calling, as established from a credential. */
export interface Principal {
  readonly userId: string;
  readonly email: string;
  readonly isSuperAdmin: boolean;
  readonly credentialId: string;
  readonly credentialKind: CredentialKind;
  /** When the credential used expires (null: never); a key it creates may not outlive it. */
  readonly credentialExpiresAt?: Date | null;
  /** The organization the caller acts in: the owner of everything it creates and the scope of what it reads. */
  readonly orgId: string;
  /** The caller's role there (a super admin who is not a member acts as an owner). */
  readonly orgRole: OrgRole;
  /** Whether that organization is suspended: then only the caller's own operations (`NONE`) are open. */
  readonly orgSuspended: boolean;
}

export type Permission = 'MANAGE_SUPER_ADMINS' | 'MANAGE_USERS' | 'MANAGE_VERIFIED_MODELS' | 'VIEW_AUDIT_LOG' | 'MANAGE_REFUSED_DELIVERIES';

/** Every permission there is, in the order `GET /api/me` lists them. */
export const ALL_PERMISSIONS: readonly Permission[] = ['MANAGE_SUPER_ADMINS', 'MANAGE_USERS', 'MANAGE_VERIFIED_MODELS', 'VIEW_AUDIT_LOG', 'MANAGE_REFUSED_DELIVERIES'];

/** Super admins hold every permission; nobody else holds any admin permission. */
export function permissionsOf(principal: { isSuperAdmin: boolean }): Permission[] {
  return principal.isSuperAdmin ? [...ALL_PERMISSIONS] : [];
}

/** Throws 403 unless the principal holds `permission`. */
export function requirePermission(principal: Principal, permission: Permission): void {
  if (!permissionsOf(principal).includes(permission)) throw new ForbiddenError(`This operation requires the ${permission} permission`);
}

const LAST_USED_RESOLUTION_MS = 60_000;
const CACHE_LIMIT = 10_000;

/**
 * Resolves `X-Access-Token` and `X-Session-API-Key` secrets to principals. A verified secret is
 * remembered for `cacheTtlMs`, so the webhook's hot path does not pay a database round trip per
 * request; revocation and suspension therefore take effect within that time (expiry at once).
 */
export class Authenticator {
  private readonly cache = new Map<string, { principal: Principal; expiresAt: number }>();
  private readonly lastUsedWrittenAt = new Map<string, number>();

  constructor(
    private readonly em: EntityManager,
    private readonly cacheTtlMs: number,
  ) {}

  /** The principal holding `secret` as a credential of `kind`; throws 401 when there is none. */
  async authenticate(kind: CredentialKind, secret: string | undefined): Promise<Principal> {
    const label = kind === 'access_token' ? 'X-Access-Token' : 'X-Session-API-Key';
    if (!secret) throw new UnauthenticatedError(`Missing ${label} header`);
    const hash = hashSecret(secret);
    const now = Date.now();
    const cached = this.cached(`${kind}:${hash}`, now);
    if (cached) return cached;

    const em = this.em.fork();
    const credential = await em.findOne(Credential, { secretHash: hash, kind, revokedAt: null }, { populate: ['user'] });
    if (!credential || !sameHash(credential.secretHash, hash)) throw new UnauthenticatedError(`Invalid ${label}`);
    // The holder of the secret may learn why it stopped working.
    if (credential.expiresAt && credential.expiresAt.getTime() <= now) {
      throw new UnauthenticatedError(`Invalid ${label}: it expired at ${credential.expiresAt.toISOString()}`);
    }
    if (credential.user.suspendedAt) throw new UnauthenticatedError(`Invalid ${label}: the account is suspended`);
    const membership = await this.membershipOfCredential(em, credential, label);
    const principal: Principal = {
      userId: credential.user.id,
      email: credential.user.email,
      isSuperAdmin: credential.user.isSuperAdmin,
      credentialId: credential.id,
      credentialKind: kind,
      credentialExpiresAt: credential.expiresAt,
      orgId: membership.orgId,
      orgRole: membership.role,
      orgSuspended: membership.suspended,
    };
    this.remember(`${kind}:${hash}`, principal, now);
    this.recordUse(credential.id, now);
    return principal;
  }

  /**
   * The same caller acting in `orgId` (`X-Org-Id`, or an `org_id` in the path); undefined when they are not a
   * member of it (or it does not exist). A session API key acts only in its own organization.
   */
  async inOrganization(principal: Principal, orgId: string): Promise<Principal | undefined> {
    if (orgId === principal.orgId) return principal;
    if (principal.credentialKind === 'session_api_key') return undefined;
    const key = `org:${principal.credentialId}:${orgId}`;
    const now = Date.now();
    const cached = this.cached(key, now);
    if (cached) return cached;
    const membership = await membershipOf(this.em, principal.userId, orgId, principal.isSuperAdmin);
    if (!membership) return undefined;
    const acting: Principal = { ...principal, orgId, orgRole: membership.role, orgSuspended: membership.suspended };
    this.remember(key, acting, now);
    return acting;
  }

  /**
   * Of these callers (a credential acting in an organization), those still good, as `credentialId/orgId`: the
   * credential not revoked or expired, its user not suspended, the organization not suspended and still
   * theirs. One query, for the live streams' periodic check of the callers they were opened by.
   */
  async stillValid(callers: readonly { credentialId: string; orgId: string }[]): Promise<Set<string>> {
    if (callers.length === 0) return new Set();
    const rows = await validCallers(this.em, callers.map((c) => c.credentialId), callers.map((c) => c.orgId));
    return new Set(rows.map((row) => `${row.credential_id}/${row.org_id}`));
  }

  /**
   * Where a credential acts by default: a session API key in its organization, as a member (a viewer if its
   * maker has become one), while that user belongs there and the organization is not suspended; an access token
   * in its user's default one.
   */
  private async membershipOfCredential(em: EntityManager, credential: Credential, label: string): Promise<Membership> {
    const user = credential.user;
    if (credential.kind === 'access_token') return defaultMembership(em, user.id);
    const orgId = credential.orgId ?? user.id;
    const membership = await membershipOf(em, user.id, orgId, false);
    if (!membership) throw new UnauthenticatedError(`Invalid ${label}: the user who created it is no longer a member of its organization`);
    if (membership.suspended) throw new UnauthenticatedError(`Invalid ${label}: its organization is suspended`);
    // Never more than its maker may do now: a maker since made a viewer leaves the key reading only.
    return { ...membership, role: membership.role === 'viewer' ? 'viewer' : 'member' };
  }

  /** The principal remembered under `key`, while it is still fresh. */
  private cached(key: string, now: number): Principal | undefined {
    const entry = this.cache.get(key);
    return entry && entry.expiresAt > now ? entry.principal : undefined;
  }

  /** Remembers `principal` under `key` for `cacheTtlMs`, never past its credential's expiry. */
  private remember(key: string, principal: Principal, now: number): void {
    if (this.cacheTtlMs <= 0) return;
    if (this.cache.size >= CACHE_LIMIT) this.cache.clear();
    this.cache.set(key, { principal, expiresAt: Math.min(now + this.cacheTtlMs, principal.credentialExpiresAt?.getTime() ?? Infinity) });
  }

  /** Keeps `last_used_at` roughly current without a write per request: at most once a minute, not awaited. */
  private recordUse(credentialId: string, now: number): void {
    const last = this.lastUsedWrittenAt.get(credentialId) ?? 0;
    if (now - last < LAST_USED_RESOLUTION_MS) return;
    if (this.lastUsedWrittenAt.size >= CACHE_LIMIT) this.lastUsedWrittenAt.clear();
    this.lastUsedWrittenAt.set(credentialId, now);
    touchCredential(this.em, credentialId).catch(() => this.lastUsedWrittenAt.delete(credentialId));
  }
}
