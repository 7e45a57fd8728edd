import type { components, operations } from '../../../generated/openapi.ts';
import type { OrganizationAdministration } from '../../organizations/organization-administration.ts';
import { principalOf, respond, type OperationHandlers } from '../context.ts';

type Schemas = components['schemas'];
type ListQuery = NonNullable<operations['listAllOrganizations']['parameters']['query']>;
type OrgPath = operations['inspectOrganization']['parameters']['path'];

/** Handlers of the `organization-administration` tag; the spec restricts every operation to MANAGE_USERS. */
export function organizationAdministrationHandlers(organizations: OrganizationAdministration): OperationHandlers {
  return {
    async listAllOrganizations(operation, ctx) {
      const query = operation.request.query as ListQuery;
      respond<Schemas['AdminOrganizationPage']>(ctx, 200, await organizations.list({ q: query.q, limit: query.limit ?? 50, offset: query.offset ?? 0 }));
    },
    async inspectOrganization(operation, ctx) {
      const { org_id } = operation.request.params as OrgPath;
      respond<Schemas['AdminOrganizationDetail']>(ctx, 200, await organizations.get(org_id.toLowerCase()));
    },
    async suspendOrganization(operation, ctx) {
      const { org_id } = operation.request.params as OrgPath;
      respond<Schemas['AdminOrganization']>(ctx, 200, await organizations.setSuspended(principalOf(operation).userId, org_id.toLowerCase(), true));
    },
    async resumeOrganization(operation, ctx) {
      const { org_id } = operation.request.params as OrgPath;
      respond<Schemas['AdminOrganization']>(ctx, 200, await organizations.setSuspended(principalOf(operation).userId, org_id.toLowerCase(), false));
    },
  };
}
