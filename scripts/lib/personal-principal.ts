import { randomUUID } from 'node:crypto';
import type { Principal } from '../../src/identity/authenticator.ts';

/** A user acting as the owner of their personal organization (whose id is the user's), as a script calling a service needs. */
export function personalPrincipal(userId: string, email: string): Principal {
  return {
    userId,
    email,
    isSuperAdmin: false,
    credentialId: randomUUID(),
    credentialKind: 'access_token',
    orgId: userId,
    orgRole: 'owner',
    orgSuspended: false,
  };
}
