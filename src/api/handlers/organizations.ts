import type { components, operations } from '../../../generated/openapi.ts';
import type { OrganizationService } from '../../organizations/organization-service.ts';
import { toCreatedInvitationView, toInvitationView, toMemberView, toOrganizationView } from '../../organizations/mapper.ts';
import { principalOf, respond, type OperationHandlers } from '../context.ts';

type Schemas = components['schemas'];
type MemberPath = operations['updateOrganizationMember']['parameters']['path'];
type InvitationPath = operations['revokeInvitation']['parameters']['path'];
type TokenPath = operations['acceptInvitation']['parameters']['path'];

/** Handlers of the `organizations` tag; the organization acted in is the path's `org_id` (see `scopeToOrganization`). */
export function organizationHandlers(organizations: OrganizationService): OperationHandlers {
  return {
    async listOrganizations(operation, ctx) {
      const { organizations: list } = await organizations.membershipsOf(principalOf(operation).userId);
      respond<Schemas['OrganizationList']>(ctx, 200, { organizations: list.map(toOrganizationView) });
    },
    async createOrganization(operation, ctx) {
      const body = operation.request.requestBody as Schemas['OrganizationCreate'];
      const organization = await organizations.create(principalOf(operation), body.name);
      ctx.set('Location', `/api/orgs/${organization.id}`);
      respond<Schemas['Organization']>(ctx, 201, toOrganizationView(organization));
    },
    async getOrganization(operation, ctx) {
      respond<Schemas['Organization']>(ctx, 200, toOrganizationView(await organizations.get(principalOf(operation))));
    },
    async updateOrganization(operation, ctx) {
      const body = operation.request.requestBody as Schemas['OrganizationUpdate'];
      respond<Schemas['Organization']>(ctx, 200, toOrganizationView(await organizations.rename(principalOf(operation), body.name)));
    },
    async deleteOrganization(operation, ctx) {
      await organizations.delete(principalOf(operation));
      ctx.status = 204;
    },
    async listOrganizationMembers(operation, ctx) {
      const members = await organizations.members(principalOf(operation));
      respond<Schemas['OrganizationMemberList']>(ctx, 200, { members: members.map(toMemberView) });
    },
    async updateOrganizationMember(operation, ctx) {
      const { user_id } = operation.request.params as MemberPath;
      const body = operation.request.requestBody as Schemas['OrganizationMemberUpdate'];
      const member = await organizations.changeRole(principalOf(operation), user_id.toLowerCase(), body.role);
      respond<Schemas['OrganizationMember']>(ctx, 200, toMemberView(member));
    },
    async removeOrganizationMember(operation, ctx) {
      const { user_id } = operation.request.params as MemberPath;
      await organizations.removeMember(principalOf(operation), user_id.toLowerCase());
      ctx.status = 204;
    },
    async leaveOrganization(operation, ctx) {
      const principal = principalOf(operation);
      await organizations.removeMember(principal, principal.userId);
      ctx.status = 204;
    },
    async createInvitation(operation, ctx) {
      const body = operation.request.requestBody as Schemas['InvitationCreate'];
      const issued = await organizations.invite(principalOf(operation), body.email, body.role);
      respond<Schemas['CreatedInvitation']>(ctx, 201, toCreatedInvitationView(issued));
    },
    async listInvitations(operation, ctx) {
      const invitations = await organizations.pendingInvitations(principalOf(operation));
      respond<Schemas['InvitationList']>(ctx, 200, { invitations: invitations.map(toInvitationView) });
    },
    async revokeInvitation(operation, ctx) {
      const { invitation_id } = operation.request.params as InvitationPath;
      await organizations.revokeInvitation(principalOf(operation), invitation_id.toLowerCase());
      ctx.status = 204;
    },
    async acceptInvitation(operation, ctx) {
      const { token } = operation.request.params as TokenPath;
      respond<Schemas['Organization']>(ctx, 200, toOrganizationView(await organizations.accept(principalOf(operation), token)));
    },
  };
}
