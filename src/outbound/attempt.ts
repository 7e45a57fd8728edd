import type { OutboundWebhookConfig } from '../config.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import type { Logger } from '../logger.ts';
import { post, type SendResult } from './http-sender.ts';
import type { EndpointRow, MessageRow } from './mapper.ts';
import { openHeaders } from './endpoint-headers.ts';
import type { KeyObject } from 'node:crypto';
import { signature, signingKey } from './signing.ts';
import { RefusedTargetError, resolveTarget } from './target-guard.ts';
import { ENDPOINT_SECRET_PURPOSE } from './webhook-endpoint-service.ts';

/** One message at one endpoint, with what sending it needs of the endpoint. */
export type DeliveryRow = MessageRow & Pick<EndpointRow, 'owner_id' | 'url' | 'headers' | 'rate_limit' | 'secret' | 'previous_secret' | 'previous_secret_until' | 'disabled'>;

/** One attempt made, before it is recorded. */
export interface Attempt {
  row: DeliveryRow;
  attempt: number;
  startedAt: Date;
  result: SendResult;
  refused: boolean;
}

/** Decrypted secrets and headers kept per process, by their ciphertext (a rotation or an edit is a new ciphertext); cleared when this large. */
const MAX_OPENED = 10_000;

/** Makes one attempt of a message at one endpoint: check the target, sign, post. */
export class AttemptMaker {
  /** Each sealed secret's HMAC key, and each sealed header set, opened once: decrypting per attempt cost more than the HMAC. */
  private readonly keys = new Map<string, KeyObject>();
  private readonly headers = new Map<string, Record<string, string>>();

  constructor(
    private readonly box: SecretBox,
    private readonly config: Pick<OutboundWebhookConfig, 'allowHttp' | 'allowPrivate' | 'timeoutMs'>,
    private readonly log: Logger,
  ) {}

  /** Whether attempt `attempt` is still to be made (not by another instance, nor before a crash). */
  static due(row: DeliveryRow, attempt: number): boolean {
    return !(row.attempts >= attempt || (row.state !== 'pending' && row.attempts + 1 !== attempt));
  }

  /** Makes attempt `attempt` unless it was made already (by another instance, or before a crash). */
  async make(row: DeliveryRow, attempt: number, body: () => Promise<string | Buffer>): Promise<Attempt | undefined> {
    if (!AttemptMaker.due(row, attempt)) return undefined;
    const startedAt = new Date();
    if (row.disabled && row.type !== 'webhook.test') {
      const result = { statusCode: null, error: 'The endpoint is disabled', responseExcerpt: null, durationMs: 0 };
      return { row, attempt, startedAt, result, refused: true };
    }
    const result = await this.send(row, body);
    const refused = result.statusCode === null && result.error?.startsWith('Refused:') === true;
    return { row, attempt, startedAt, result, refused };
  }

  private async send(row: DeliveryRow, bodyOf: () => Promise<string | Buffer>): Promise<SendResult> {
    const url = new URL(row.url);
    let target: { address: string; family: 4 | 6 };
    try {
      if (url.protocol === 'http:' && !this.config.allowHttp) throw new RefusedTargetError('http:// targets are not allowed');
      target = await resolveTarget(url, this.config.allowPrivate);
    } catch (error) {
      const reason = error instanceof RefusedTargetError ? error.message : `cannot resolve ${url.hostname}`;
      return { statusCode: null, error: `Refused: ${reason}`, responseExcerpt: null, durationMs: 0 };
    }
    const body = await bodyOf();
    const timestamp = Math.floor(Date.now() / 1000);
    let signatures: string[];
    let custom: Record<string, string>;
    try {
      signatures = this.secretsOf(row).map((secret) => signature(this.keyOf(secret), row.id, timestamp, body));
      custom = this.headersOf(row.headers);
    } catch (error) {
      // A keyring without the key the secret was encrypted with: nothing unsigned ever leaves.
      this.log.error({ err: error, endpointId: row.endpoint_id }, 'webhook endpoint secret cannot be decrypted');
      return { statusCode: null, error: 'The endpoint secret cannot be decrypted with the configured keys', responseExcerpt: null, durationMs: 0 };
    }
    // The endpoint's own headers first: the signature headers always win (and checkHeaders refuses them anyway).
    const headers = { ...custom, 'webhook-id': row.id, 'webhook-timestamp': String(timestamp), 'webhook-signature': signatures.join(' ') };
    return post(url, target, headers, body, this.config.timeoutMs);
  }

  private keyOf(sealed: string): KeyObject {
    let key = this.keys.get(sealed);
    if (!key) {
      key = signingKey(this.box.decrypt(sealed, ENDPOINT_SECRET_PURPOSE));
      if (this.keys.size >= MAX_OPENED) this.keys.clear();
      this.keys.set(sealed, key);
    }
    return key;
  }

  private headersOf(sealed: string | null): Record<string, string> {
    if (sealed === null) return {};
    let opened = this.headers.get(sealed);
    if (!opened) {
      opened = openHeaders(this.box, sealed);
      if (this.headers.size >= MAX_OPENED) this.headers.clear();
      this.headers.set(sealed, opened);
    }
    return opened;
  }

  /** The endpoint's secret, and the previous one while a rotation's overlap lasts. */
  private secretsOf(row: DeliveryRow): string[] {
    const overlapping = row.previous_secret && row.previous_secret_until && new Date(row.previous_secret_until) > new Date();
    return overlapping ? [row.secret, row.previous_secret!] : [row.secret];
  }
}
