import type { EntityManager } from '@mikro-orm/postgresql';
import { ForbiddenError, UnauthenticatedError } from '../errors.ts';
import { Credential, type CredentialKind } from './entities.ts';
import { hashSecret, sameHash } from './secrets.ts';

/** Who is calling, as established from a credential. */
export interface Principal {
  readonly userId: string;
  readonly email: string;
  readonly isSuperAdmin: boolean;
  readonly credentialId: string;
  readonly credentialKind: CredentialKind;
}

export type Permission = 'MANAGE_SUPER_ADMINS' | 'MANAGE_VERIFIED_MODELS';

/** Super admins hold every permission; nobody else holds any admin permission. */
export function requirePermission(principal: Principal, permission: Permission): void {
  if (!principal.isSuperAdmin) throw new ForbiddenError(`This operation requires the ${permission} permission`);
}

const LAST_USED_RESOLUTION_MS = 60_000;
const CACHE_LIMIT = 10_000;

/**
 * Resolves `X-Access-Token` and `X-Session-API-Key` secrets to principals. A verified secret is
 * remembered for `cacheTtlMs`, so the webhook's hot path does not pay a database round trip per
 * request; revocation therefore takes effect within that time.
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
    const cached = this.cache.get(`${kind}:${hash}`);
    if (cached && cached.expiresAt > now) return cached.principal;

    const em = this.em.fork();
    const credential = await em.findOne(
      Credential,
      { secretHash: hash, kind, revokedAt: null },
      { populate: ['user'] },
    );
    if (!credential || !sameHash(credential.secretHash, hash)) throw new UnauthenticatedError(`Invalid ${label}`);
    const principal: Principal = {
      userId: credential.user.id,
      email: credential.user.email,
      isSuperAdmin: credential.user.isSuperAdmin,
      credentialId: credential.id,
      credentialKind: kind,
    };
    if (this.cacheTtlMs > 0) {
      if (this.cache.size >= CACHE_LIMIT) this.cache.clear();
      this.cache.set(`${kind}:${hash}`, { principal, expiresAt: now + this.cacheTtlMs });
    }
    this.recordUse(credential.id, now);
    return principal;
  }

  /** Keeps `last_used_at` roughly current without a write per request. */
  private recordUse(credentialId: string, now: number): void {
    const last = this.lastUsedWrittenAt.get(credentialId) ?? 0;
    if (now - last < LAST_USED_RESOLUTION_MS) return;
    if (this.lastUsedWrittenAt.size >= CACHE_LIMIT) this.lastUsedWrittenAt.clear();
    this.lastUsedWrittenAt.set(credentialId, now);
    this.em
      .getConnection()
      .execute('update credentials set last_used_at = now() where id = ?', [credentialId])
      .catch(() => this.lastUsedWrittenAt.delete(credentialId));
  }
}
