import { createHmac, createSecretKey, randomBytes, type KeyObject } from 'node:crypto';

const SECRET_PREFIX = 'whsec_';

/** A new endpoint secret as Standard Webhooks writes it: `whsec_` + base64 of 24 random bytes. */
export function generateSecret(): string {
  return SECRET_PREFIX + randomBytes(24).toString('base64');
}

/** The HMAC key of a secret (the base64 after `whsec_`), made once per secret rather than per signature. */
export function signingKey(secret: string): KeyObject {
  return createSecretKey(Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64'));
}

/** `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` under `secret` (a secret as stored, or its `signingKey`). */
export function signature(secret: string | KeyObject, messageId: string, timestampSeconds: number, body: string | Buffer): string {
  const key = typeof secret === 'string' ? signingKey(secret) : secret;
  const mac = createHmac('sha256', key).update(`${messageId}.${timestampSeconds}.`).update(body).digest('base64');
  return `v1,${mac}`;
}
