import { createHash } from 'node:crypto';

/** A short content hash (SHA-256, 22 base64url characters): names a version of an asset and makes its ETag; not a signature. */
export function contentHashOf(content: string | Buffer): string {
  return createHash('sha256').update(content).digest('base64url').slice(0, 22);
}
