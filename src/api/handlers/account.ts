import type { components, operations } from '../../../generated/openapi.ts';
import type { IdentityService } from '../../identity/identity-service.ts';
import { toCreatedKeyView, toKeyView, toMeView, toOrgKeyView } from '../../identity/mapper.ts';
import { principalOf, respond, type OperationHandlers } from '../context.ts';

type KeyCreate = components['schemas']['KeyCreate'];
type KeyPath = operations['revokeKey']['parameters']['path'];
type OrgKeyPath = operations['revokeOrganizationKey']['parameters']['path'];

/** Handlers of the `account` tag: the caller's own account and keys, and an organization's keys for its admins. */
export function accountHandlers(identity: IdentityService): OperationHandlers {
  return {
    async getMe(operation, ctx) {
      const user = await identity.getUser(principalOf(operation).userId);
      respond<components['schemas']['Me']>(ctx, 200, toMeView(user));
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
