import type { EntityManager } from '@mikro-orm/postgresql';
import type { SecretBox } from '../crypto/secret-box.ts';
import { claimRecord, completeRecord, findRecord, releaseRecord } from './queries.ts';

/** How long the first response is answered again. */
export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;

/** A first request still in flight after this long is taken to have died with its instance; the key is free again. */
export const IDEMPOTENCY_ABANDON_AFTER_MS = 5 * 60_000;

/** A response as stored and answered again: status, the headers that describe it, the body's bytes. */
export interface StoredResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** What an incoming request with a key is. */
export type IdempotencyOutcome =
  | { kind: 'first' }
  | { kind: 'replay'; response: StoredResponse }
  | { kind: 'other-request' }
  | { kind: 'in-flight' };

/**
 * Idempotency keys (IETF draft-ietf-httpapi-idempotency-key-header): the first response to a request
 * with a key, per credential owner, answered again for 24 h to the same request. Stored responses are
 * sealed with the secret box, as they may hold a created key or a webhook secret.
 */
export class IdempotencyService {
  constructor(
    private readonly em: EntityManager,
    private readonly secretBox: SecretBox,
  ) {}

  /** Claims `key` for this request, or says what the earlier request with it was. */
  async begin(ownerId: string, key: string, operationId: string, requestHash: Buffer): Promise<IdempotencyOutcome> {
    // Twice at most: a record can be released between the claim and the read.
    for (let attempt = 0; attempt < 2; attempt++) {
      const claimed = await claimRecord(this.em, { ownerId, key, operationId, requestHash, ttlMs: IDEMPOTENCY_TTL_MS, abandonAfterMs: IDEMPOTENCY_ABANDON_AFTER_MS });
      if (claimed) return { kind: 'first' };
      const existing = await findRecord(this.em, ownerId, key);
      if (!existing) continue;
      if (existing.operation_id !== operationId || !existing.request_hash.equals(requestHash)) return { kind: 'other-request' };
      if (existing.status === null || existing.response === null) return { kind: 'in-flight' };
      return { kind: 'replay', response: this.open(existing.response, ownerId, key) };
    }
    return { kind: 'in-flight' };
  }

  /** Keeps the first request's response for the next 24 h. */
  async complete(ownerId: string, key: string, response: StoredResponse): Promise<void> {
    const sealed = this.secretBox.encrypt(
      JSON.stringify({ status: response.status, headers: response.headers, body: response.body.toString('base64') }),
      purposeOf(ownerId, key),
    );
    await completeRecord(this.em, ownerId, key, response.status, sealed);
  }

  /** The first request failed: the key is free for a retry. */
  async release(ownerId: string, key: string): Promise<void> {
    await releaseRecord(this.em, ownerId, key);
  }

  private open(sealed: string, ownerId: string, key: string): StoredResponse {
    const stored = JSON.parse(this.secretBox.decrypt(sealed, purposeOf(ownerId, key))) as { status: number; headers: Record<string, string>; body: string };
    return { status: stored.status, headers: stored.headers, body: Buffer.from(stored.body, 'base64') };
  }
}

/** Bound into the ciphertext: a sealed response opens only as the record it was written for. */
function purposeOf(ownerId: string, key: string): string {
  return `idempotency-response:${ownerId}:${key}`;
}
