import type { SecretBox } from '../crypto/secret-box.ts';
import { InvalidInputError } from '../errors.ts';
import { isSecretLookingKey } from '../secret-keys.ts';

/** The secret box's purpose for an endpoint's custom headers (its AAD). */
const HEADERS_PURPOSE = 'webhook_endpoint:headers';

/** Headers an endpoint's own cannot replace, and why (the 422 says it). */
const RESERVED = new Map<string, string>([
  ...['webhook-id', 'webhook-timestamp', 'webhook-signature'].map((name) => [name, 'a signature header'] as const),
  ...['connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade'].map(
    (name) => [name, 'a hop-by-hop header'] as const,
  ),
  ...['host', 'content-length', 'content-type', 'content-encoding', 'expect'].map((name) => [name, 'written by the server'] as const),
]);

/** An endpoint's custom headers as given; 422 naming the first reserved or repeated (whatever its case) one. */
export function checkHeaders(headers: Record<string, string>): Record<string, string> {
  const seen = new Set<string>();
  for (const name of Object.keys(headers)) {
    const lower = name.toLowerCase();
    const reserved = RESERVED.get(lower);
    if (reserved) throw new InvalidInputError(`The header ${name} cannot be set: it is ${reserved}`, ['body', 'headers', name], 'value_error', name);
    if (seen.has(lower)) throw new InvalidInputError(`The header ${name} is given twice`, ['body', 'headers', name], 'value_error', name);
    seen.add(lower);
  }
  return headers;
}

/** The headers encrypted for storage; null when there are none. */
export function sealHeaders(box: SecretBox, headers: Record<string, string> | null | undefined): string | null {
  return headers && Object.keys(headers).length > 0 ? box.encrypt(JSON.stringify(headers), HEADERS_PURPOSE) : null;
}

export function openHeaders(box: SecretBox, sealed: string | null): Record<string, string> {
  return sealed === null ? {} : (JSON.parse(box.decrypt(sealed, HEADERS_PURPOSE)) as Record<string, string>);
}

/** What an endpoint's view shows of its headers: the values of all but the sensitive ones, and the names of those. */
export function headersView(headers: Record<string, string>): { headers: Record<string, string>; sensitive_headers: string[] } {
  const shown: Record<string, string> = {};
  const sensitive: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (isSecretLookingKey(name)) sensitive.push(name);
    else shown[name] = value;
  }
  return { headers: shown, sensitive_headers: sensitive };
}
