import { EntitySchema, type Opt } from '@mikro-orm/core';
import { User } from '../identity/entities.ts';

/** An issue-tracker workspace. Its two secrets are held only as `SecretBox` ciphertexts. */
export class Workspace {
  id!: number;
  name!: string;
  /** The organization the workspace belongs to: its admins manage it, its members link to it. */
  ownerId!: string;
  /** Who registered it (null once that user is deleted; the organization keeps the workspace). */
  admin!: User | null;
  svcAccEmail!: string;
  webhookSecretCiphertext!: string;
  svcAccApiKeyCiphertext!: string;
  cloudId!: string;
  isActive: Opt<boolean> = true;
  createdAt: Opt<Date> = new Date();
  updatedAt: Opt<Date> = new Date();
}

/** A user's link to a workspace; a user has at most one active link. */
export class WorkspaceLink {
  id!: number;
  user!: User;
  workspace!: Workspace;
  isActive: Opt<boolean> = true;
  createdAt: Opt<Date> = new Date();
  updatedAt: Opt<Date> = new Date();
}

export const WorkspaceSchema = new EntitySchema<Workspace>({
  class: Workspace,
  tableName: 'workspaces',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    name: { type: 'string', length: 255, unique: 'workspaces_name_key' },
    ownerId: { type: 'uuid', fieldName: 'owner_id' },
    admin: { kind: 'm:1', entity: () => User, fieldName: 'admin_user_id', nullable: true, deleteRule: 'set null' },
    svcAccEmail: { type: 'string', length: 320 },
    webhookSecretCiphertext: { type: 'text', lazy: true },
    svcAccApiKeyCiphertext: { type: 'text', lazy: true },
    cloudId: { type: 'string', length: 255 },
    isActive: { type: 'boolean' },
    createdAt: { type: 'Date' },
    updatedAt: { type: 'Date', onUpdate: () => new Date() },
  },
});

export const WorkspaceLinkSchema = new EntitySchema<WorkspaceLink>({
  class: WorkspaceLink,
  tableName: 'workspace_links',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    user: { kind: 'm:1', entity: () => User, deleteRule: 'cascade' },
    workspace: { kind: 'm:1', entity: () => Workspace, deleteRule: 'cascade' },
    isActive: { type: 'boolean' },
    createdAt: { type: 'Date' },
    updatedAt: { type: 'Date', onUpdate: () => new Date() },
  },
});
