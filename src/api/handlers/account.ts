import type { components, operations } from '../../../generated/openapi.ts';
import type { IdentityService } from '../../identity/identity-service.ts';
import { toCreatedKeyView, toKeyView, toMeView, toOrgKeyView } from '../../identity/mapper.ts';
import type { Principal } from '../../identity/authenticator.ts';
import type { OrganizationService } from '../../organizations/organization-service.ts';
import { toMeOrganizationsView } from '../../organizations/mapper.ts';
import { principalOf, respond, type OperationHandlers } from '../context.ts';

type KeyCreate = components['schemas']['KeyCreate'];
type KeyPath = operations['revokeKey']['parameters']['path'];
type OrgKeyPath = operations['revokeOrganizationKey']['parameters']['path'];

/** Handlers of the `account` tag: the caller's own account and keys, and an organization's keys for its admins. */
export function accountHandlers(identity: IdentityService, organizations: OrganizationService): OperationHandlers {
  const meOf = async (principal: Principal): Promise<components['schemas']['Me']> => {
    const [user, memberships] = await Promise.all([identity.getUser(principal.userId), organizations.membershipsOf(principal.userId)]);
    return { ...toMeView(user), ...toMeOrganizationsView(memberships, principal) };
  };
  return {
    async getMe(operation, ctx) {
      respond<components['schemas']['Me']>(ctx, 200, await meOf(principalOf(operation)));
    },
    async updateMe(operation, ctx) {
      const principal = principalOf(operation);
      const body = operation.request.requestBody as components['schemas']['MeUpdate'];
      await organizations.setDefault(principal.userId, body.default_org_id?.toLowerCase() ?? null);
      respond<components['schemas']['Me']>(ctx, 200, await meOf(principal));
    },
    async listKeys(operation, ctx) {
      const principal = principalOf(operation);
      const keys = await identity.listKeys(principal.userId, principal.orgId);
      respond<components['schemas']['KeyList']>(ctx, 200, { keys: keys.map(toKeyView) });
    },
    async createKey(operation, ctx) {
      const principal = principalOf(operation);
      const body = operation.request.requestBody as KeyCreate;
      const issued = await identity.issueKey(
        principal.userId,
        { userId: principal.userId },
        { kind: body.kind, name: body.name, expiresInDays: body.expires_in_days, orgId: principal.orgId },
        principal.credentialExpiresAt,
      );
      respond<components['schemas']['CreatedKey']>(ctx, 201, toCreatedKeyView(issued));
    },
    async revokeKey(operation, ctx) {
      const principal = principalOf(operation);
      const { key_id } = operation.request.params as KeyPath;
      await identity.revokeKey(principal.userId, principal.userId, key_id.toLowerCase());
      ctx.status = 204;
    },
    async listOrganizationKeys(operation, ctx) {
      // The path's organization, as `scopeToOrganization` resolved it (MANAGE_KEYS checked there).
      const keys = await identity.listOrganizationKeys(principalOf(operation).orgId);
      respond<components['schemas']['OrgKeyList']>(ctx, 200, { keys: keys.map(toOrgKeyView) });
    },
    async revokeOrganizationKey(operation, ctx) {
      const principal = principalOf(operation);
      const { key_id } = operation.request.params as OrgKeyPath;
      await identity.revokeOrganizationKey(principal.userId, principal.orgId, key_id.toLowerCase());
      ctx.status = 204;
    },
  };
}
