import type { Context as OperationContext } from 'openapi-backend';
import { ForbiddenError, InvalidInputError, NotFoundError } from '../errors.ts';
import type { Authenticator, Principal } from '../identity/authenticator.ts';
import { roleAllows, type OrgPermission } from '../organizations/roles.ts';
import { headerOf } from './context.ts';
import { canonicalUuid, DASHED_UUID_PATTERN } from '../uuid.ts';

const CALLER_SCHEMES = ['AccessToken', 'APIKeyHeader'] as const;

/** The role an operation declares it needs (`x-org-permission` in the spec); undefined for instance-level and public ones. */
export function orgPermissionOf(operation: OperationContext['operation']): OrgPermission | undefined {
  return (operation as { 'x-org-permission'?: OrgPermission })['x-org-permission'];
}

/**
 * Puts an authenticated caller in the organization the request acts in (an `org_id` in the path, else
 * `X-Org-Id`, else the credential's own) and checks the role the operation declares: the one place every
 * operation's organization scope is decided (docs/organizations.md). Answers the organization's id.
 */
export async function scopeToOrganization(c: OperationContext, authenticator: Authenticator): Promise<string | undefined> {
  const permission = orgPermissionOf(c.operation);
  if (!permission) return undefined;
  const results = (c.security ?? {}) as Record<string, Principal | { principal: Principal } | { error: unknown } | undefined>;
  const scheme = CALLER_SCHEMES.find((name) => results[name] && !('error' in results[name]!));
  // A stream ticket already acts in its conversation's organization (see `redeemTicket`).
  const ticket = results.StreamTicket;
  let caller = scheme ? (results[scheme] as Principal) : ticket && 'principal' in ticket ? ticket.principal : undefined;
  if (!caller) return undefined;

  const pathOrg = (c.request.params as Record<string, string | undefined>)?.org_id;
  const headerOrg = scheme ? headerOf(c, 'x-org-id') : undefined;
  if (pathOrg !== undefined) {
    const acting = DASHED_UUID_PATTERN.test(pathOrg) ? await authenticator.inOrganization(caller, canonicalUuid(pathOrg)) : undefined;
    // Not a member looks exactly like no such organization, so ids do not leak.
    if (!acting) throw new NotFoundError('Organization not found');
    caller = acting;
  } else if (headerOrg !== undefined) {
    if (!DASHED_UUID_PATTERN.test(headerOrg)) {
      throw new InvalidInputError('Input should be a valid UUID', ['header', 'X-Org-Id'], 'uuid_parsing', headerOrg.slice(0, 64));
    }
    const acting = await authenticator.inOrganization(caller, canonicalUuid(headerOrg));
    if (!acting) throw new ForbiddenError(`You are not a member of organization ${canonicalUuid(headerOrg)}`);
    caller = acting;
  }
  if (caller.orgSuspended && permission !== 'NONE') throw new ForbiddenError('This organization is suspended');
  if (!roleAllows(caller.orgRole, permission)) {
    throw new ForbiddenError(`Your role in this organization (${caller.orgRole}) does not allow this operation (${permission})`);
  }
  if (scheme) results[scheme] = caller;
  return caller.orgId;
}
