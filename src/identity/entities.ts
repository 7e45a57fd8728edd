import { EntitySchema, type Opt } from '@mikro-orm/core';

/** A person or admin. Super admins hold every permission. */
export class User {
  id!: string;
  email!: string;
  isSuperAdmin: Opt<boolean> = false;
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
  createdAt: Opt<Date> = new Date();
  lastUsedAt: Date | null = null;
  revokedAt: Date | null = null;
}

export const UserSchema = new EntitySchema<User>({
  class: User,
  tableName: 'users',
  properties: {
    id: { type: 'uuid', primary: true },
    email: { type: 'string', length: 320, unique: 'users_email_key' },
    isSuperAdmin: { type: 'boolean' },
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
    secretHash: { type: 'string', length: 64, unique: 'credentials_secret_hash_key' },
    createdAt: { type: 'Date' },
    lastUsedAt: { type: 'Date', nullable: true },
    revokedAt: { type: 'Date', nullable: true },
  },
});
