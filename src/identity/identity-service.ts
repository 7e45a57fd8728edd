import { randomUUID } from 'node:crypto';
import { fullFormats } from 'ajv-formats/dist/formats.js';
import { LockMode, UniqueConstraintViolationException, type EntityManager } from '@mikro-orm/postgresql';
import { ConflictError, InvalidInputError, NotFoundError } from '../errors.ts';
import { Credential, User, type CredentialKind } from './entities.ts';
import { generateSecret, hashSecret, kindOfSecret } from './secrets.ts';

/** The contract's `format: email`, so every stored address is one the API may return. */
const EMAIL_PATTERN = fullFormats.email as RegExp;
const EMAIL_MAX_LENGTH = 320;

/** A user as the admin CLI lists them: no secret or hash, only counts and the last use. */
export interface UserSummary {
  userId: string;
  email: string;
  isSuperAdmin: boolean;
  createdAt: Date;
  activeAccessTokens: number;
  activeSessionApiKeys: number;
  /** Latest use of any of the user's credentials. */
  lastUsedAt: Date | null;
}

const USER_SUMMARIES_SQL = `
  select u.id, u.email, u.is_super_admin, u.created_at,
    count(c.id) filter (where c.kind = 'access_token' and c.revoked_at is null) as active_access_tokens,
    count(c.id) filter (where c.kind = 'session_api_key' and c.revoked_at is null) as active_session_api_keys,
    max(c.last_used_at) as last_used_at
  from users u left join credentials c on c.user_id = u.id
  group by u.id
  order by u.email`;

/** A row as the driver returns it: counts (bigint) and timestamps arrive as strings. */
interface UserSummaryRow {
  id: string;
  email: string;
  is_super_admin: boolean;
  created_at: string;
  active_access_tokens: string;
  active_session_api_keys: string;
  last_used_at: string | null;
}

/** The canonical form of an e-mail address (trimmed, lower-cased); throws when it is not one. */
export function normalizeEmail(email: string): string {
  const address = email.trim().toLowerCase();
  if (address.length > EMAIL_MAX_LENGTH || !EMAIL_PATTERN.test(address)) {
    throw new InvalidInputError(`"${email}" is not a valid e-mail address`, ['email'], 'value_error', email);
  }
  return address;
}

/** Users, their credentials and super-admin rights. */
export class IdentityService {
  constructor(private readonly em: EntityManager) {}

  /** Creates a user with a first access token; the token is returned here and never again. */
  async createUser(email: string, options: { superAdmin?: boolean } = {}): Promise<{ user: User; accessToken: string }> {
    const address = normalizeEmail(email);
    try {
      return await this.em.transactional(async (em) => {
        const user = em.create(User, { id: randomUUID(), email: address, isSuperAdmin: options.superAdmin ?? false });
        return { user, accessToken: addCredential(em, user, 'access_token') };
      });
    } catch (error) {
      // The unique index decides, so two concurrent creations cannot both succeed.
      if (error instanceof UniqueConstraintViolationException) {
        throw new ConflictError(`A user with the e-mail ${address} already exists`);
      }
      throw error;
    }
  }

  /** Issues a new credential of `kind` to an existing user; the secret is returned here and never again. */
  async issueCredential(email: string, kind: CredentialKind): Promise<{ user: User; secret: string }> {
    const em = this.em.fork();
    const user = await findUser(em, email);
    const secret = addCredential(em, user, kind);
    await em.flush();
    return { user, secret };
  }

  /** Revokes the access token or session API key `secret`; revoking it again changes nothing. */
  async revoke(secret: string): Promise<Credential> {
    const kind = kindOfSecret(secret);
    if (!kind) {
      throw new InvalidInputError('This is neither an access token nor a session API key', ['token'], 'value_error');
    }
    const em = this.em.fork();
    const credential = await em.findOne(Credential, { secretHash: hashSecret(secret), kind }, { populate: ['user'] });
    if (!credential) throw new NotFoundError(`No ${kind.replace(/_/g, ' ')} matches the given secret`);
    credential.revokedAt ??= new Date();
    await em.flush();
    return credential;
  }

  /** Makes the user a super admin (no change if they are one already). */
  async grantSuperAdmin(email: string): Promise<User> {
    const em = this.em.fork();
    const user = await findUser(em, email);
    user.isSuperAdmin = true;
    await em.flush();
    return user;
  }

  /** Takes super-admin rights away; refuses to remove the last super admin. */
  async revokeSuperAdmin(email: string): Promise<User> {
    return this.em.transactional(async (em) => {
      // Locking every super admin serialises concurrent revocations, so two of them cannot each
      // see "one other admin remains" and together remove the last two.
      const superAdmins = await em.find(User, { isSuperAdmin: true }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      const user = await findUser(em, email);
      if (user.isSuperAdmin && superAdmins.length === 1) {
        throw new ConflictError(`${user.email} is the last super admin; grant another user first`);
      }
      user.isSuperAdmin = false;
      return user;
    });
  }

  /** Every user, by e-mail, with their active credential counts. */
  async listUsers(): Promise<UserSummary[]> {
    const rows = await this.em.getConnection().execute<UserSummaryRow[]>(USER_SUMMARIES_SQL);
    return rows.map((row) => ({
      userId: row.id,
      email: row.email,
      isSuperAdmin: row.is_super_admin,
      createdAt: new Date(row.created_at),
      activeAccessTokens: Number(row.active_access_tokens),
      activeSessionApiKeys: Number(row.active_session_api_keys),
      lastUsedAt: row.last_used_at === null ? null : new Date(row.last_used_at),
    }));
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

async function findUser(em: EntityManager, email: string): Promise<User> {
  const address = normalizeEmail(email);
  const user = await em.findOne(User, { email: address });
  if (!user) throw new NotFoundError(`No user has the e-mail ${address}`);
  return user;
}

/** Persists (on the next flush) a new credential for `user` and returns its secret. */
function addCredential(em: EntityManager, user: User, kind: CredentialKind): string {
  const secret = generateSecret(kind);
  em.create(Credential, { id: randomUUID(), user, kind, secretHash: hashSecret(secret) });
  return secret;
}
