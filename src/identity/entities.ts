import { EntitySchema, type Opt } from '@mikro-orm/core';

/** A person or admin. Super admins hold every permission. */
export class User {
  id!: string;
  email!: string;
  isSuperAdmin: Opt<boolean> = false;
  /** Set while the user is suspended: every credential of theirs is refused; their data stays. */
  suspendedAt: Date | null = null;
  createdAt: Opt<Date> = new Date();
  updatedAt: Opt<Date> = new Date();
}

export type CredentialKind = 'access_token' | 'session_api_key';

/** An issued secret. Only its SHA-256 is kept; the secret itself is shown once, at issue. */
export class Credential {
  id!: string;
  user!: User;
  kind!: CredentialKind;
  secretHash!: string;
  /** The organization a session API key acts in (null for access tokens: they choose per request). */
  orgId: string | null = null;
  /** The owner's label for it; null for keys issued before keys had names. */
  name: string | null = null;
  /** The secret's first 8 characters, to recognise it; null for keys issued before this was kept. */
  prefix: string | null = null;
  createdAt: Opt<Date> = new Date();
  lastUsedAt: Date | null = null;
  /** After this time the key is refused; null: it does not expire. */
  expiresAt: Date | null = null;
  revokedAt: Date | null = null;
}

export const UserSchema = new EntitySchema<User>({
  class: User,
  tableName: 'users',
  properties: {
    id: { type: 'uuid', primary: true },
    email: { type: 'string', length: 320, unique: 'users_email_key' },
    isSuperAdmin: { type: 'boolean' },
    suspendedAt: { type: 'Date', nullable: true },
    createdAt: { type: 'Date' },
    updatedAt: { type: 'Date', onUpdate: () => new Date() },
  },
});

export const CredentialSchema = new EntitySchema<Credential>({
  class: Credential,
  tableName: 'credentials',
  properties: {
    id: { type: 'uuid', primary: true },
    user: { kind: 'm:1', entity: () => User, deleteRule: 'cascade' },
    kind: { type: 'string', length: 20 },
    orgId: { type: 'uuid', nullable: true },
    secretHash: { type: 'string', length: 64, unique: 'credentials_secret_hash_key' },
    name: { type: 'string', length: 100, nullable: true },
    prefix: { type: 'string', length: 8, nullable: true },
    createdAt: { type: 'Date' },
    lastUsedAt: { type: 'Date', nullable: true },
    expiresAt: { type: 'Date', nullable: true },
    revokedAt: { type: 'Date', nullable: true },
  },
});
