import { BlockList, isIP } from 'node:net';
import { lookup } from 'node:dns/promises';
import { InvalidInputError } from '../errors.ts';

/**
 * Addresses a webhook must never reach unless private targets are allowed: loopback, private,
 * carrier-grade NAT, link-local (169.254.0.0/16: the cloud metadata address), unique-local,
 * unspecified, multicast and reserved ranges, and IPv4 written inside IPv6.
 */
const FORBIDDEN = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24], ['203.0.113.0', 24],
  ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) {
  FORBIDDEN.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['fec0::', 10], ['ff00::', 8], ['64:ff9b::', 96], ['2001:db8::', 32], ['100::', 64],
] as const) {
  FORBIDDEN.addSubnet(network, prefix, 'ipv6');
}

/** Whether `address` (an IP literal) is one webhooks must not reach. */
export function isForbiddenAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return FORBIDDEN.check(address, 'ipv4');
  if (family !== 6) return true;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address) ?? /^::(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  if (mapped) return FORBIDDEN.check(mapped[1]!, 'ipv4');
  if (/^::ffff:[0-9a-f]{1,4}:[0-9a-f]{1,4}$/i.test(address)) return true;
  return FORBIDDEN.check(address, 'ipv6');
}

/**
 * Checks an endpoint URL as given by its owner (422 naming `field` otherwise): absolute,
 * `https:` (or `http:` when allowed), with a host, no credentials and no fragment.
 */
export function checkEndpointUrl(raw: string, allowHttp: boolean, field: (string | number)[]): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new InvalidInputError('URL must be an absolute URL', field, 'url_parsing', raw);
  }
  const schemes = allowHttp ? ['https:', 'http:'] : ['https:'];
  if (!schemes.includes(url.protocol)) {
    throw new InvalidInputError(allowHttp ? 'URL scheme should be http or https' : 'URL scheme should be https', field, 'url_scheme', raw);
  }
  if (!url.hostname) throw new InvalidInputError('URL must have a host', field, 'url_parsing', raw);
  if (url.username || url.password) throw new InvalidInputError('URL must not contain credentials', field, 'url_credentials', raw);
  if (url.hash || raw.includes('#')) throw new InvalidInputError('URL must not contain a fragment', field, 'url_fragment', raw);
  return url.href;
}

/** A delivery refused before connecting (the message says why; it is logged on the attempt). */
export class RefusedTargetError extends Error {
  override name = 'RefusedTargetError';
}

/**
 * The address to connect to for `url`: its host resolved, every address checked (a name with one
 * private address among public ones is refused), the first one returned so the connection goes to
 * exactly the address that was checked (no second lookup an attacker's DNS could answer otherwise).
 */
export async function resolveTarget(url: URL, allowPrivate: boolean): Promise<{ address: string; family: 4 | 6 }> {
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const literal = isIP(host);
  const addresses = literal
    ? [{ address: host, family: literal as 4 | 6 }]
    : (await lookup(host, { all: true, verbatim: true })).map((a) => ({ address: a.address, family: a.family as 4 | 6 }));
  if (addresses.length === 0) throw new RefusedTargetError(`${host} does not resolve`);
  if (!allowPrivate) {
    const forbidden = addresses.find((a) => isForbiddenAddress(a.address));
    if (forbidden) {
      throw new RefusedTargetError(`${host} resolves to ${forbidden.address}, a private, loopback or link-local address; refused`);
    }
  }
  return addresses[0]!;
}
