import type { components } from '../../generated/openapi.ts';
import type { Principal } from '../identity/authenticator.ts';
import { roleAllows } from '../organizations/roles.ts';
import type { Workspace, WorkspaceLink } from './entities.ts';

export type WorkspaceView = components['schemas']['Workspace'];
export type WorkspaceLinkView = components['schemas']['WorkspaceLink'];

/** Who looks at a workspace: the organization they act in and their role there. */
export type WorkspaceViewer = Pick<Principal, 'orgId' | 'orgRole'>;

/** The API's view of a workspace as `viewer` sees it (`editable`: theirs to manage in the organization they act in); never its secrets. */
export function toWorkspaceView(workspace: Workspace, viewer: WorkspaceViewer): WorkspaceView {
  return {
    id: workspace.id,
    name: workspace.name,
    issuetracker_cloud_id: workspace.cloudId,
    status: workspace.isActive ? 'active' : 'inactive',
    editable: workspace.ownerId === viewer.orgId && roleAllows(viewer.orgRole, 'MANAGE_WORKSPACES'),
    created_at: workspace.createdAt.toISOString(),
    updated_at: workspace.updatedAt.toISOString(),
  };
}

/** The API's view of a user's link with its workspace, as `viewer` (the linked user) sees it. */
export function toWorkspaceLinkView(link: WorkspaceLink, viewer: WorkspaceViewer): WorkspaceLinkView {
  return {
    id: link.id,
    idp_user_id: link.user.id,
    issuetracker_workspace_id: link.workspace.id,
    status: link.isActive ? 'active' : 'inactive',
    created_at: link.createdAt.toISOString(),
    updated_at: link.updatedAt.toISOString(),
    workspace: toWorkspaceView(link.workspace, viewer),
  };
}
