import { createHmac, randomBytes } from 'node:crypto';

const SECRET_PREFIX = 'whsec_';

/** A new endpoint secret as Standard Webhooks writes it: `whsec_` + base64 of 24 random bytes. */
export function generateSecret(): string {
  return SECRET_PREFIX + randomBytes(24).toString('base64');
}

/** `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` under `secret` (the key is the base64 after `whsec_`). */
export function signature(secret: string, messageId: string, timestampSeconds: number, body: string): string {
  const key = Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
  const mac = createHmac('sha256', key).update(`${messageId}.${timestampSeconds}.${body}`).digest('base64');
  return `v1,${mac}`;
}
