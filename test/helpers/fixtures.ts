import { randomUUID } from 'node:crypto';
import { generateSecret, hashSecret } from '../../src/identity/secrets.ts';
import type { CredentialKind } from '../../src/identity/entities.ts';
import { testDatabase } from './hooks.ts';
import { rememberSecret } from './secret-scan.ts';

export interface UserFixture {
  userId: string;
  /** The user's personal organization: the same id as the user. */
  orgId: string;
  email: string;
  accessToken: string;
  sessionApiKey: string;
}

let counter = 0;

/** Inserts a credential for a user straight into the database and returns its secret. */
export async function issueFixtureCredential(userId: string, kind: CredentialKind): Promise<string> {
  const secret = generateSecret(kind);
  rememberSecret(secret);
  await testDatabase()
    .orm.em.getConnection()
    .execute('insert into credentials (id, user_id, kind, secret_hash) values (?, ?, ?, ?)', [
      randomUUID(),
      userId,
      kind,
      hashSecret(secret),
    ]);
  return secret;
}

/** A user with an access token and a session API key, inserted straight into the database. */
export async function createUserFixture(options: { email?: string; superAdmin?: boolean } = {}): Promise<UserFixture> {
  const userId = randomUUID();
  const email = options.email ?? `user${++counter}-${userId.slice(0, 8)}@example.com`;
  await testDatabase()
    .orm.em.getConnection()
    .execute('insert into users (id, email, is_super_admin) values (?, ?, ?)', [userId, email, options.superAdmin ?? false]);
  return {
    userId,
    orgId: userId,
    email,
    accessToken: await issueFixtureCredential(userId, 'access_token'),
    sessionApiKey: await issueFixtureCredential(userId, 'session_api_key'),
  };
}
