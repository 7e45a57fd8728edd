import { randomUUID } from 'node:crypto';
import { fullFormats } from 'ajv-formats/dist/formats.js';
import { LockMode, UniqueConstraintViolationException, type EntityManager } from '@mikro-orm/postgresql';
import { recordAudit, type AuditActor } from '../audit/audit-service.ts';
import { ConflictError, InvalidInputError, NotFoundError } from '../errors.ts';
import { Credential, User, type CredentialKind } from './entities.ts';
import { generateSecret, hashSecret, kindOfSecret } from './secrets.ts';
import * as queries from './queries.ts';
import type { UserFilter } from './queries.ts';

/** The contract's `format: email`, so every stored address is one the API may return. */
const EMAIL_PATTERN = fullFormats.email as RegExp;
const EMAIL_MAX_LENGTH = 320;
const DAY_MS = 86_400_000;
/** Unrevoked keys one user may hold: bounds `GET /api/keys`, which is not paginated. */
export const MAX_ACTIVE_KEYS_PER_USER = 100;
/** Arbitrary constant: the advisory lock that serialises every change that could remove the last active super admin. */
const SUPER_ADMIN_LOCK_ID = 7_240_122;

/** A user as the admin CLI and `GET /api/admin/users` list them: no secret or hash, only counts and the last use. */
export interface UserSummary {
  userId: string;
  email: string;
  isSuperAdmin: boolean;
  suspended: boolean;
  createdAt: Date;
  activeAccessTokens: number;
  activeSessionApiKeys: number;
  /** Latest use of any of the user's credentials. */
  lastUsedAt: Date | null;
}

/** Names a user by id (the HTTP API) or by e-mail (the admin CLI). */
export type UserRef = { userId: string } | { email: string };

/** What a new key should be. */
export interface KeyRequest {
  kind: CredentialKind;
  name?: string | null;
  expiresInDays?: number;
  /** The organization a session API key acts in; the user's personal one when absent. */
  orgId?: string;
}

/** A key just issued: its record and its secret, which is shown this once and never again. */
export interface IssuedKey {
  credential: Credential;
  secret: string;
}

/** The canonical form of an e-mail address (trimmed, lower-cased); throws when it is not one. */
export function normalizeEmail(email: string, loc: (string | number)[] = ['email']): string {
  const address = email.trim().toLowerCase();
  if (address.length > EMAIL_MAX_LENGTH || !EMAIL_PATTERN.test(address)) {
    throw new InvalidInputError(`"${email}" is not a valid e-mail address`, loc, 'value_error', email);
  }
  return address;
}

/**
 * Users, their keys (access tokens and session API keys), suspension and super-admin rights: the one
 * code path of the admin CLI and the HTTP API. Every change appends an audit row in its transaction.
 */
export class IdentityService {
  constructor(private readonly em: EntityManager) {}

  /** Creates a user, and a first key when `firstKey` is given (its secret returned here and never again). */
  async createUser(
    actor: AuditActor,
    email: string,
    options: { superAdmin?: boolean; firstKey?: KeyRequest; emailLoc?: (string | number)[] } = {},
  ): Promise<{ user: User; key?: IssuedKey }> {
    const address = normalizeEmail(email, options.emailLoc);
    try {
      return await this.em.fork().transactional(async (em) => {
        const user = em.create(User, { id: randomUUID(), email: address, isSuperAdmin: options.superAdmin ?? false });
        await em.flush();
        await recordAudit(em, {
          actor,
          action: 'user.created',
          targetType: 'user',
          targetId: user.id,
          summary: { email: address, is_super_admin: user.isSuperAdmin },
        });
        const key = options.firstKey ? await addKey(em, actor, user, options.firstKey) : undefined;
        return { user, key };
      });
    } catch (error) {
      // The unique index decides, so two concurrent creations cannot both succeed.
      if (error instanceof UniqueConstraintViolationException) {
        throw new ConflictError(`A user with the e-mail ${address} already exists`);
      }
      throw error;
    }
  }

  /**
   * Issues a new key to a user who is not suspended. `ceiling`: the expiry of the key asking for it,
   * which the new key may not outlive.
   */
  async issueKey(actor: AuditActor, ref: UserRef, request: KeyRequest, ceiling?: Date | null): Promise<IssuedKey> {
    if (ceiling) {
      const expiresAt = request.expiresInDays === undefined ? null : new Date(Date.now() + request.expiresInDays * DAY_MS);
      if (!expiresAt || expiresAt > ceiling) {
        throw new InvalidInputError(
          `The key making this request expires at ${ceiling.toISOString()}; a key it creates must expire no later (give expires_in_days)`,
          ['body', 'expires_in_days'],
          'value_error',
          request.expiresInDays,
        );
      }
    }
    return this.em.fork().transactional(async (em) => {
      const user = await findUser(em, ref, { lock: true });
      if (user.suspendedAt) throw new ConflictError(`${user.email} is suspended; resume them first`);
      const active = await em.count(Credential, { user, revokedAt: null });
      if (active >= MAX_ACTIVE_KEYS_PER_USER) {
        throw new ConflictError(`A user may hold at most ${MAX_ACTIVE_KEYS_PER_USER} active keys; revoke some first`);
      }
      return addKey(em, actor, user, request);
    });
  }

  /** The user's keys that are not revoked (expired ones included), newest first: access tokens, and session API keys of `orgId`. */
  async listKeys(userId: string, orgId: string): Promise<Credential[]> {
    return this.em
      .fork()
      .find(Credential, { user: userId, revokedAt: null, $or: [{ orgId }, { orgId: null }] }, { orderBy: [{ createdAt: 'desc' }, { id: 'asc' }] });
  }

  /** Revokes one of the user's own keys; another user's, unknown or revoked id → 404 alike. */
  async revokeKey(actor: AuditActor, userId: string, keyId: string): Promise<Credential> {
    return this.em.fork().transactional(async (em) => {
      const credential = await em.findOne(Credential, { id: keyId, user: userId, revokedAt: null });
      if (!credential) throw new NotFoundError('No key of yours has this id');
      credential.revokedAt = new Date();
      await auditRevocation(em, actor, credential);
      return credential;
    });
  }

  /** Every member's session API keys of `orgId` that are not revoked, newest first, with their users. */
  async listOrganizationKeys(orgId: string): Promise<Credential[]> {
    return this.em
      .fork()
      .find(Credential, { orgId, kind: 'session_api_key', revokedAt: null }, { populate: ['user'], orderBy: [{ createdAt: 'desc' }, { id: 'asc' }] });
  }

  /** Revokes any session API key of `orgId` (an organization admin's); another organization's, unknown or revoked → 404 alike. */
  async revokeOrganizationKey(actor: AuditActor, orgId: string, keyId: string): Promise<Credential> {
    return this.em.fork().transactional(async (em) => {
      const credential = await em.findOne(Credential, { id: keyId, orgId, kind: 'session_api_key', revokedAt: null }, { populate: ['user'] });
      if (!credential) throw new NotFoundError('No key of this organization has this id');
      credential.revokedAt = new Date();
      await auditRevocation(em, actor, credential);
      return credential;
    });
  }

  /** Revokes the access token or session API key `secret` (the CLI); revoking it again changes nothing. */
  async revoke(actor: AuditActor, secret: string): Promise<Credential> {
    const kind = kindOfSecret(secret);
    if (!kind) {
      throw new InvalidInputError('This is neither an access token nor a session API key', ['token'], 'value_error');
    }
    return this.em.fork().transactional(async (em) => {
      const credential = await em.findOne(Credential, { secretHash: hashSecret(secret), kind }, { populate: ['user'] });
      if (!credential) throw new NotFoundError(`No ${kind.replace(/_/g, ' ')} matches the given secret`);
      if (!credential.revokedAt) {
        credential.revokedAt = new Date();
        await auditRevocation(em, actor, credential);
      }
      return credential;
    });
  }

  /** Makes the user a super admin; `changed` is false when they were one already. */
  async grantSuperAdmin(actor: AuditActor, ref: UserRef): Promise<{ user: User; changed: boolean }> {
    return this.em.fork().transactional(async (em) => {
      const user = await findUser(em, ref, { lock: true });
      if (user.isSuperAdmin) return { user, changed: false };
      user.isSuperAdmin = true;
      await recordAudit(em, { actor, action: 'super_admin.granted', targetType: 'user', targetId: user.id, summary: { email: user.email } });
      return { user, changed: true };
    });
  }

  /**
   * Takes super-admin rights away. Refused (409) when it would leave no active super admin, even
   * when requests race: they take the same advisory lock, so each counts after the other committed.
   * `strict`: a user who is not a super admin is a 404 (the HTTP API); otherwise nothing changes.
   */
  async revokeSuperAdmin(actor: AuditActor, ref: UserRef, options: { strict?: boolean } = {}): Promise<User> {
    return this.em.fork().transactional(async (em) => {
      await lockSuperAdmins(em);
      const user = await findUser(em, ref, { lock: true });
      if (!user.isSuperAdmin) {
        if (options.strict) throw new NotFoundError(`${user.email} is not a super admin`);
        return user;
      }
      if (!user.suspendedAt && (await activeSuperAdmins(em)) <= 1) {
        throw new ConflictError(`${user.email} is the last super admin; grant another user first`);
      }
      user.isSuperAdmin = false;
      await recordAudit(em, { actor, action: 'super_admin.revoked', targetType: 'user', targetId: user.id, summary: { email: user.email } });
      return user;
    });
  }

  /**
   * Suspends a user: every credential of theirs is refused (within `CREDENTIAL_CACHE_TTL_MS`);
   * their data stays. `byUserId`: the caller, who may not suspend themselves. The last active
   * super admin cannot be suspended. Suspending a suspended user changes nothing.
   */
  async suspendUser(actor: AuditActor, ref: UserRef, byUserId?: string): Promise<User> {
    return this.em.fork().transactional(async (em) => {
      await lockSuperAdmins(em);
      const user = await findUser(em, ref, { lock: true });
      if (user.id === byUserId) throw new ConflictError('You cannot suspend yourself');
      if (user.suspendedAt) return user;
      if (user.isSuperAdmin && (await activeSuperAdmins(em)) <= 1) {
        throw new ConflictError(`${user.email} is the last super admin; grant another user first`);
      }
      user.suspendedAt = new Date();
      await recordAudit(em, { actor, action: 'user.suspended', targetType: 'user', targetId: user.id, summary: { email: user.email } });
      return user;
    });
  }

  /** Lifts a suspension; the user's keys that are neither revoked nor expired work again. */
  async resumeUser(actor: AuditActor, ref: UserRef): Promise<User> {
    return this.em.fork().transactional(async (em) => {
      const user = await findUser(em, ref, { lock: true });
      if (!user.suspendedAt) return user;
      user.suspendedAt = null;
      await recordAudit(em, { actor, action: 'user.resumed', targetType: 'user', targetId: user.id, summary: { email: user.email } });
      return user;
    });
  }

  /** One user. */
  async getUser(userId: string): Promise<User> {
    return findUser(this.em.fork(), { userId });
  }

  /** Users by e-mail with their active credential counts; `q` matches part of the e-mail, in any case. */
  async listUsers(
    query: { q?: string; userId?: string; limit?: number; offset?: number } = {},
  ): Promise<{ users: UserSummary[]; total: number }> {
    const limit = query.limit ?? 1_000_000;
    const offset = query.offset ?? 0;
    const q = query.q?.trim().toLowerCase();
    const filter: UserFilter = query.userId !== undefined ? { userId: query.userId } : q ? { emailPart: q } : {};
    const rows = await queries.userSummaries(this.em, filter, limit, offset);
    const total = rows.length > 0 ? Number(rows[0]!.total) : offset > 0 ? await queries.userCount(this.em, filter) : 0;
    return {
      total,
      users: rows.map((row) => ({
        userId: row.id,
        email: row.email,
        isSuperAdmin: row.is_super_admin,
        suspended: row.suspended,
        createdAt: new Date(row.created_at),
        activeAccessTokens: Number(row.active_access_tokens),
        activeSessionApiKeys: Number(row.active_session_api_keys),
        lastUsedAt: row.last_used_at === null ? null : new Date(row.last_used_at),
      })),
    };
  }

  /** One user as `listUsers` shows them. */
  async userSummary(userId: string): Promise<UserSummary> {
    const { users } = await this.listUsers({ userId });
    if (!users[0]) throw new NotFoundError('No user has this id');
    return users[0];
  }

  /** Whether any user exists yet (the start-up log tells how to create the first super admin until one does). */
  async hasUsers(): Promise<boolean> {
    return (await this.em.fork().count(User, {})) > 0;
  }

  /** The super admins, by e-mail. */
  async listSuperAdmins(): Promise<User[]> {
    return this.em.fork().find(User, { isSuperAdmin: true }, { orderBy: { email: 'asc' } });
  }

}

async function findUser(em: EntityManager, ref: UserRef, options: { lock?: boolean } = {}): Promise<User> {
  const lockMode = options.lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {};
  if ('userId' in ref) {
    const user = await em.findOne(User, { id: ref.userId }, lockMode);
    if (!user) throw new NotFoundError('No user has this id');
    return user;
  }
  const address = normalizeEmail(ref.email);
  const user = await em.findOne(User, { email: address }, lockMode);
  if (!user) throw new NotFoundError(`No user has the e-mail ${address}`);
  return user;
}

/** Serialises, until the transaction ends, every change that could remove the last active super admin. */
async function lockSuperAdmins(em: EntityManager): Promise<void> {
  await queries.lockForTransaction(em, SUPER_ADMIN_LOCK_ID);
}

/** Super admins who are not suspended, i.e. who can still administer. */
async function activeSuperAdmins(em: EntityManager): Promise<number> {
  return em.count(User, { isSuperAdmin: true, suspendedAt: null });
}

/** Persists a new key for `user`, audits it (never the secret) and returns it with its secret. */
async function addKey(em: EntityManager, actor: AuditActor, user: User, request: KeyRequest): Promise<IssuedKey> {
  const secret = generateSecret(request.kind);
  const credential = em.create(Credential, {
    id: randomUUID(),
    user,
    kind: request.kind,
    orgId: request.kind === 'session_api_key' ? (request.orgId ?? user.id) : null,
    secretHash: hashSecret(secret),
    name: request.name ?? null,
    prefix: secret.slice(0, 8),
    expiresAt: request.expiresInDays === undefined ? null : new Date(Date.now() + request.expiresInDays * DAY_MS),
  });
  await em.flush();
  await recordAudit(em, {
    actor,
    action: 'key.created',
    targetType: 'key',
    targetId: credential.id,
    summary: {
      user_id: user.id,
      ...(credential.orgId && credential.orgId !== user.id ? { org_id: credential.orgId } : {}),
      kind: credential.kind,
      name: credential.name,
      prefix: credential.prefix,
      expires_at: credential.expiresAt?.toISOString() ?? null,
    },
    // A session API key is its organization's; an access token is its person's (instance-level).
    orgId: credential.orgId,
  });
  return { credential, secret };
}

async function auditRevocation(em: EntityManager, actor: AuditActor, credential: Credential): Promise<void> {
  await recordAudit(em, {
    actor,
    action: 'key.revoked',
    targetType: 'key',
    targetId: credential.id,
    summary: { user_id: credential.user.id, kind: credential.kind, name: credential.name, prefix: credential.prefix },
    orgId: credential.orgId,
  });
}
