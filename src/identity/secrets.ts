import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { CredentialKind } from './entities.ts';

/** Prefixes tell a reader (and `revoke`) which kind of secret they hold, as GitHub's tokens do. */
const PREFIX: Record<CredentialKind, string> = {
  access_token: 'apat_',
  session_api_key: 'apsk_',
};

/** A new random secret of the given kind: 256 bits, base64url. */
export function generateSecret(kind: CredentialKind): string {
  return PREFIX[kind] + randomBytes(32).toString('base64url');
}

/** The kind a secret claims by its prefix, if any. */
export function kindOfSecret(secret: string): CredentialKind | undefined {
  return (Object.keys(PREFIX) as CredentialKind[]).find((kind) => secret.startsWith(PREFIX[kind]));
}

/**
 * What we store instead of the secret. A fast hash is enough: the secrets are 256-bit random
 * values, so there is nothing for a slow password hash to protect against.
 */
export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

/** Compares two hex digests in constant time. */
export function sameHash(a: string, b: string): boolean {
  const left = Buffer.from(a, 'hex');
  const right = Buffer.from(b, 'hex');
  return left.length === right.length && timingSafeEqual(left, right);
}
