import type { components, operations } from '../../../generated/openapi.ts';
import { normalizeEmail, type IdentityService, type UserRef } from '../../identity/identity-service.ts';
import { toSuperAdminView } from '../../identity/mapper.ts';
import { principalOf, respond, type OperationHandlers } from '../context.ts';

type Schemas = components['schemas'];
type UserPath = operations['revokeSuperAdmin']['parameters']['path'];

/** Handlers of the `super-admins` tag; the spec restricts every operation to MANAGE_SUPER_ADMINS. */
export function superAdminHandlers(identity: IdentityService): OperationHandlers {
  return {
    async listSuperAdmins(_operation, ctx) {
      const superAdmins = await identity.listSuperAdmins();
      respond<Schemas['SuperAdminList']>(ctx, 200, { super_admins: superAdmins.map(toSuperAdminView) });
    },
    async grantSuperAdmin(operation, ctx) {
      const body = operation.request.requestBody as Schemas['SuperAdminGrant'];
      const { user, changed } = await identity.grantSuperAdmin(principalOf(operation).userId, userRefOf(body));
      respond<Schemas['SuperAdmin']>(ctx, changed ? 201 : 200, toSuperAdminView(user));
    },
    async revokeSuperAdmin(operation, ctx) {
      const { user_id } = operation.request.params as UserPath;
      await identity.revokeSuperAdmin(principalOf(operation).userId, { userId: user_id.toLowerCase() }, { strict: true });
      ctx.status = 204;
    },
  };
}

/** The user a grant names, by id or by e-mail (checked here, so a bad address is a 422 on `body.email`). */
function userRefOf(body: Schemas['SuperAdminGrant']): UserRef {
  return 'user_id' in body ? { userId: body.user_id.toLowerCase() } : { email: normalizeEmail(body.email, ['body', 'email']) };
}
