import type { components } from '../../../generated/openapi.ts';
import type { IdentityService } from '../../identity/identity-service.ts';
import { toSuperAdminView } from '../../identity/mapper.ts';
import { respond, type OperationHandlers } from '../context.ts';

/** Handlers of the `super-admins` tag. */
export function superAdminHandlers(identity: IdentityService): OperationHandlers {
  return {
    async listSuperAdmins(_operation, ctx) {
      const superAdmins = await identity.listSuperAdmins();
      respond<components['schemas']['SuperAdminList']>(ctx, 200, { super_admins: superAdmins.map(toSuperAdminView) });
    },
  };
}
