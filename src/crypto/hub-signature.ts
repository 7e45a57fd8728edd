import { createHmac, timingSafeEqual } from 'node:crypto';

const HEADER_VALUE = /^sha256=([0-9a-fA-F]{64})$/;

/**
 * Checks an `X-Hub-Signature: sha256=<hex>` header (the form Jira Cloud and GitHub use) against
 * the HMAC-SHA256 of the exact body bytes, in constant time.
 */
export function verifyHubSignature(secret: string, body: Buffer, header: string | undefined): boolean {
  const match = header ? HEADER_VALUE.exec(header.trim()) : null;
  if (!match) return false;
  const expected = createHmac('sha256', secret).update(body).digest();
  return timingSafeEqual(expected, Buffer.from(match[1]!, 'hex'));
}
