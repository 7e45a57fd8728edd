import { HttpError } from '../errors.ts';
import { hashSecret, sameHash } from '../identity/secrets.ts';

/**
 * The `MetricsToken` security scheme: `Authorization: Bearer <METRICS_TOKEN>`. Without a configured
 * token `/metrics` is open (keep it on a private network then). Compared in constant time.
 */
export function metricsTokenChecker(configured: string | undefined): (authorization: string | undefined) => true {
  const expected = configured ? hashSecret(configured) : undefined;
  return (authorization) => {
    if (!expected) return true;
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
    if (match && sameHash(hashSecret(match[1]!), expected)) return true;
    throw new HttpError(401, match ? 'Invalid metrics token' : 'Missing metrics token (Authorization: Bearer …)', {
      'WWW-Authenticate': 'Bearer realm="metrics"',
    });
  };
}
