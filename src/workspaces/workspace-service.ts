import { createHash, randomUUID } from 'node:crypto';
import { LockMode, UniqueConstraintViolationException, type EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../../generated/openapi.ts';
import { SecretBox } from '../crypto/secret-box.ts';
import { verifyHubSignature } from '../crypto/hub-signature.ts';
import { recordAudit } from '../audit/audit-service.ts';
import { ConflictError, ForbiddenError, NotFoundError, UnauthenticatedError } from '../errors.ts';
import type { Principal } from '../identity/authenticator.ts';
import { User } from '../identity/entities.ts';
import { Workspace, WorkspaceLink } from './entities.ts';
import type { IssueTracker } from './issue-tracker.ts';
import { toWorkspaceLinkView, toWorkspaceView, type WorkspaceLinkView, type WorkspaceView } from './mapper.ts';
import * as queries from './queries.ts';

export type WorkspaceRegistration = components['schemas']['WorkspaceRegistration'];
export type TrackerDeliveryReceipt = components['schemas']['TrackerDeliveryReceipt'];

/** AAD of each secret column: a ciphertext only opens in the column it was made for. */
export const PURPOSE = {
  webhookSecret: 'workspace:webhook_secret',
  svcAccApiKey: 'workspace:svc_acc_api_key',
} as const;

const SIGNATURE_FORM = /^sha256=[0-9a-fA-F]{64}$/;

/**
 * Issue-tracker workspaces, the links of users to them, and the tracker's signed deliveries. A workspace
 * belongs to the organization it was registered in (`principal.orgId`): its admins change it, its members
 * link to it, and to anyone acting in another organization it does not exist (404). A link is the person's
 * own (at most one active), whatever organization they act in.
 */
export class WorkspaceService {
  constructor(
    private readonly em: EntityManager,
    private readonly secrets: SecretBox,
    /** Absent: nothing to verify against, the cloud id is generated here. */
    private readonly tracker?: IssueTracker,
  ) {}

  /**
   * E2: creates the workspace in the caller's organization, or updates it when it is that organization's
   * (the name is the tracker's and unique across organizations: another's → 403), and moves the caller's
   * active link to it. The operation's `x-org-permission` has made sure the caller manages workspaces there.
   */
  async register(principal: Principal, input: WorkspaceRegistration): Promise<{ created: boolean; link: WorkspaceLinkView }> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.registerOnce(principal, input);
      } catch (error) {
        // A concurrent registration of the same name (or link of the same user) won the race:
        // once more, and this time the lookup sees it (200, or 403 for someone else's).
        if (attempt < 3 && error instanceof UniqueConstraintViolationException) continue;
        throw error;
      }
    }
  }

  private async registerOnce(principal: Principal, input: WorkspaceRegistration): Promise<{ created: boolean; link: WorkspaceLinkView }> {
    const { userId, orgId } = principal;
    const existing = await this.em.fork().findOne(Workspace, { name: input.workspace_name });
    if (existing && existing.ownerId !== orgId) throw new ForbiddenError('You are not the admin of this workspace.');
    // The tracker is asked before anything is written, and outside the transaction.
    const cloudId = this.tracker
      ? (await this.tracker.verifyServiceAccount(input.workspace_name, input.svc_acc_email, input.svc_acc_api_key)).cloudId
      : (existing?.cloudId ?? randomUUID());
    const webhookSecretCiphertext = this.secrets.encrypt(input.webhook_secret, PURPOSE.webhookSecret);
    const svcAccApiKeyCiphertext = this.secrets.encrypt(input.svc_acc_api_key, PURPOSE.svcAccApiKey);

    return this.em.fork().transactional(async (em) => {
      let workspace: Workspace;
      const created = !existing;
      if (existing) {
        const locked = await em.findOne(Workspace, { id: existing.id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
        if (!locked) throw new NotFoundError('The workspace was removed meanwhile; register it again.');
        workspace = locked;
      } else {
        workspace = em.create(Workspace, {
          name: input.workspace_name,
          ownerId: orgId,
          admin: em.getReference(User, userId),
          svcAccEmail: input.svc_acc_email,
          webhookSecretCiphertext,
          svcAccApiKeyCiphertext,
          cloudId,
          isActive: input.is_active,
        });
      }
      workspace.svcAccEmail = input.svc_acc_email;
      workspace.webhookSecretCiphertext = webhookSecretCiphertext;
      workspace.svcAccApiKeyCiphertext = svcAccApiKeyCiphertext;
      workspace.cloudId = cloudId;
      workspace.isActive = input.is_active;
      await em.flush();
      await recordAudit(em, {
        actor: userId,
        action: created ? 'workspace.registered' : 'workspace.updated',
        targetType: 'workspace',
        targetId: workspace.id,
        orgId: workspace.ownerId,
        // The secrets were replaced too; what they are is never written here.
        summary: { name: workspace.name, svc_acc_email: workspace.svcAccEmail, is_active: workspace.isActive, secrets_replaced: true },
      });
      const link = await this.linkUser(em, userId, workspace);
      return { created, link: toWorkspaceLinkView(link, principal) };
    });
  }

  /** E5: the caller's active link with its workspace (the person's, whichever organization they act in). */
  async currentLink(principal: Principal): Promise<WorkspaceLinkView> {
    const link = await this.em
      .fork()
      .findOne(WorkspaceLink, { user: principal.userId, isActive: true }, { populate: ['workspace'] });
    if (!link) throw new NotFoundError('No issue-tracker workspace is linked to your account.');
    return toWorkspaceLinkView(link, principal);
  }

  /** Links the caller to an active workspace of their organization; their previous link becomes inactive. */
  async link(principal: Principal, name: string): Promise<WorkspaceLinkView> {
    try {
      return await this.em.fork().transactional(async (em) => {
        const workspace = await em.findOne(Workspace, { name, ownerId: principal.orgId });
        if (!workspace) throw new NotFoundError('No issue-tracker workspace has this name.');
        if (!workspace.isActive) throw new ConflictError('This workspace is inactive.');
        return toWorkspaceLinkView(await this.linkUser(em, principal.userId, workspace), principal);
      });
    } catch (error) {
      if (error instanceof UniqueConstraintViolationException) {
        throw new ConflictError('Your workspace link changed meanwhile; retry.');
      }
      throw error;
    }
  }

  /** Makes the caller's active link inactive. */
  async unlink(principal: Principal): Promise<void> {
    const userId = principal.userId;
    await this.em.fork().transactional(async (em) => {
      const link = await em.findOne(
        WorkspaceLink,
        { user: userId, isActive: true },
        { populate: ['workspace'], lockMode: LockMode.PESSIMISTIC_WRITE },
      );
      if (!link) throw new NotFoundError('No issue-tracker workspace is linked to your account.');
      link.isActive = false;
      link.updatedAt = new Date();
      await recordAudit(em, {
        actor: userId,
        action: 'workspace.unlinked',
        targetType: 'workspace',
        targetId: link.workspace.id,
        orgId: link.workspace.ownerId,
        summary: { user_id: userId, name: link.workspace.name },
      });
    });
  }

  /** An admin of the workspace's organization turns it off or on (`x-org-permission` checked the role). */
  async setActive(principal: Principal, name: string, isActive: boolean): Promise<WorkspaceView> {
    const userId = principal.userId;
    return this.em.fork().transactional(async (em) => {
      const workspace = await em.findOne(Workspace, { name, ownerId: principal.orgId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!workspace) throw new NotFoundError('No issue-tracker workspace has this name.');
      if (workspace.isActive !== isActive) {
        workspace.isActive = isActive;
        await em.flush();
        await recordAudit(em, {
          actor: userId,
          action: isActive ? 'workspace.activated' : 'workspace.deactivated',
          targetType: 'workspace',
          targetId: workspace.id,
          orgId: workspace.ownerId,
          summary: { name: workspace.name },
        });
      }
      return toWorkspaceView(workspace, principal);
    });
  }

  /**
   * Stores one signed delivery of the tracker, once per delivery id. The signature's form is
   * checked before the workspace is looked up, so unsigned requests learn nothing about names.
   */
  async receiveDelivery(
    name: string,
    signature: string | undefined,
    trackerDeliveryId: string | undefined,
    body: { raw: Buffer; text: string },
  ): Promise<TrackerDeliveryReceipt> {
    if (!signature) throw new UnauthenticatedError('Missing X-Hub-Signature header');
    if (!SIGNATURE_FORM.test(signature.trim())) throw new UnauthenticatedError('Invalid X-Hub-Signature');
    const em = this.em.fork();
    const workspace = await em.findOne(
      Workspace,
      { name, isActive: true },
      { populate: ['webhookSecretCiphertext'] },
    );
    if (!workspace) throw new NotFoundError('No active issue-tracker workspace has this name.');
    const secret = this.secrets.decrypt(workspace.webhookSecretCiphertext, PURPOSE.webhookSecret);
    if (!verifyHubSignature(secret, body.raw, signature)) throw new UnauthenticatedError('Invalid X-Hub-Signature');

    const deliveryId = trackerDeliveryId ?? `sha256:${createHash('sha256').update(body.raw).digest('hex')}`;
    // The body's own text (as the one JSON reader decoded it) goes into a `json` column: stored as sent.
    const inserted = await queries.insertTrackerDelivery(em, workspace.id, deliveryId, body.text);
    return { success: true, delivery_id: deliveryId, duplicate: !inserted };
  }

  /**
   * Re-encrypts every stored secret not made with the current key (after a new key was put
   * first in `SECRETS_ENCRYPTION_KEYS`), so the old key can then be dropped.
   */
  async resealSecrets(actor: string): Promise<{ workspaces: number; resealed: number; keyId: string }> {
    const current = this.secrets.currentKeyId;
    return this.em.fork().transactional(async (em) => {
      const rows = await queries.lockedWorkspaceSecrets(em);
      let resealed = 0;
      for (const row of rows) {
        const stale =
          SecretBox.keyIdOf(row.webhook_secret_ciphertext) !== current ||
          SecretBox.keyIdOf(row.svc_acc_api_key_ciphertext) !== current;
        if (!stale) continue;
        const webhookSecret = this.secrets.decrypt(row.webhook_secret_ciphertext, PURPOSE.webhookSecret);
        const apiKey = this.secrets.decrypt(row.svc_acc_api_key_ciphertext, PURPOSE.svcAccApiKey);
        await queries.updateWorkspaceSecrets(
          em,
          row.id,
          this.secrets.encrypt(webhookSecret, PURPOSE.webhookSecret),
          this.secrets.encrypt(apiKey, PURPOSE.svcAccApiKey),
        );
        await recordAudit(em, {
          actor,
          action: 'workspace.secrets_resealed',
          targetType: 'workspace',
          targetId: row.id,
          summary: { key_id: current },
        });
        resealed++;
      }
      return { workspaces: rows.length, resealed, keyId: current };
    });
  }

  /** Makes `workspace` the user's one active link (inside the caller's transaction). */
  private async linkUser(em: EntityManager, userId: string, workspace: Workspace): Promise<WorkspaceLink> {
    await em.nativeUpdate(
      WorkspaceLink,
      { user: userId, isActive: true, workspace: { $ne: workspace.id } },
      { isActive: false, updatedAt: new Date() },
    );
    let link = await em.findOne(WorkspaceLink, { user: userId, workspace: workspace.id });
    const wasActive = link?.isActive === true;
    if (link) {
      link.isActive = true;
    } else {
      link = em.create(WorkspaceLink, { user: em.getReference(User, userId), workspace, isActive: true });
    }
    await em.flush();
    if (!wasActive) {
      await recordAudit(em, {
        actor: userId,
        action: 'workspace.linked',
        targetType: 'workspace',
        targetId: workspace.id,
        orgId: workspace.ownerId,
        summary: { user_id: userId, name: workspace.name },
      });
    }
    return link;
  }
}
