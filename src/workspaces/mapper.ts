import type { components } from '../../generated/openapi.ts';
import type { Workspace, WorkspaceLink } from './entities.ts';

export type WorkspaceView = components['schemas']['Workspace'];
export type WorkspaceLinkView = components['schemas']['WorkspaceLink'];

/** The API's view of a workspace, as `viewerId` sees it; never its secrets. */
export function toWorkspaceView(workspace: Workspace, viewerId: string): WorkspaceView {
  return {
    id: workspace.id,
    name: workspace.name,
    issuetracker_cloud_id: workspace.cloudId,
    status: workspace.isActive ? 'active' : 'inactive',
    editable: workspace.admin.id === viewerId,
    created_at: workspace.createdAt.toISOString(),
    updated_at: workspace.updatedAt.toISOString(),
  };
}

/** The API's view of a user's link with its workspace. */
export function toWorkspaceLinkView(link: WorkspaceLink): WorkspaceLinkView {
  return {
    id: link.id,
    idp_user_id: link.user.id,
    issuetracker_workspace_id: link.workspace.id,
    status: link.isActive ? 'active' : 'inactive',
    created_at: link.createdAt.toISOString(),
    updated_at: link.updatedAt.toISOString(),
    workspace: toWorkspaceView(link.workspace, link.user.id),
  };
}
