import type { operations } from '../../../generated/openapi.ts';
import type { WorkspaceRegistration, WorkspaceService } from '../../workspaces/workspace-service.ts';
import { bodyTextOf, principalOf, rawBodyOf, respond, type OperationHandlers } from '../context.ts';

type WorkspacePath = operations['updateWorkspace']['parameters']['path'];
type WorkspaceUpdate = operations['updateWorkspace']['requestBody']['content']['application/json'];

/** Handlers of the `integrations` tag: issue-tracker workspaces, links and tracker deliveries. */
export function workspaceHandlers(service: WorkspaceService): OperationHandlers {
  return {
    async createWorkspaceRegistration(operation, ctx) {
      const input = operation.request.requestBody as WorkspaceRegistration;
      const { created, link } = await service.register(principalOf(operation), input);
      respond(ctx, created ? 201 : 200, link);
    },
    async getWorkspaceLink(operation, ctx) {
      respond(ctx, 200, await service.currentLink(principalOf(operation)));
    },
    async linkWorkspace(operation, ctx) {
      const { workspace_name } = operation.request.params as WorkspacePath;
      respond(ctx, 200, await service.link(principalOf(operation), workspace_name));
    },
    async unlinkWorkspace(operation, ctx) {
      await service.unlink(principalOf(operation));
      ctx.status = 204;
    },
    async updateWorkspace(operation, ctx) {
      const { workspace_name } = operation.request.params as WorkspacePath;
      const { is_active } = operation.request.requestBody as WorkspaceUpdate;
      respond(ctx, 200, await service.setActive(principalOf(operation), workspace_name, is_active));
    },
    async receiveTrackerEvent(operation, ctx) {
      const { workspace_name } = operation.request.params as WorkspacePath;
      const receipt = await service.receiveDelivery(
        workspace_name,
        ctx.get('x-hub-signature') || undefined,
        ctx.get('x-atlassian-webhook-identifier') || undefined,
        { raw: rawBodyOf(ctx), text: bodyTextOf(ctx) },
      );
      respond(ctx, 200, receipt);
    },
  };
}
