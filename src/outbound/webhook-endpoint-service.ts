import { randomUUID } from 'node:crypto';
import type { EntityManager, Knex } from '@mikro-orm/postgresql';
import { recordAudit } from '../audit/audit-service.ts';
import type { OutboundWebhookConfig } from '../config.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import { ConflictError, InvalidInputError, NotFoundError } from '../errors.ts';
import type { Principal } from '../identity/authenticator.ts';
import { canonicalUuid } from '../uuid.ts';
import {
  toAttemptView,
  toEndpointView,
  toMessageView,
  toRecoverTaskView,
  toRetryTaskView,
  type EndpointRow,
  type MessageRow,
  type WebhookAttemptView,
  type WebhookEndpointView,
  type WebhookEndpointWithSecret,
  type WebhookEventType,
  type WebhookMessageView,
  type WebhookEndpointStatsView,
  type WebhookRecoverTaskView,
  type WebhookMessageRetryTaskView,
} from './mapper.ts';
import type { OutboundQueue } from './outbound-queue.ts';
import {
  countDeliveries,
  countEndpoints,
  endpointAttemptStats,
  deleteEndpoint,
  findDelivery,
  findOwnedEndpoint,
  findRecoverTask,
  insertEndpoint,
  insertRecoverTask,
  insertTestDelivery,
  insertTestMessage,
  listAttempts,
  listDeliveries,
  listEndpoints,
  lockEndpoint,
  lockOwner,
  markDeliveryPending,
  rotateEndpointSecret,
  runningTaskKind,
  updateEndpoint,
  type DeliveryFilter,
  type RecoverTaskRow,
  type ResendTaskKind,
} from './queries.ts';
import { RECOVER_LIMIT, RECOVER_MAX_AGE_MS } from './recovery.ts';
import { checkHeaders, headersView, openHeaders, sealHeaders } from './endpoint-headers.ts';
import { generateSecret } from './signing.ts';
import { checkEndpointUrl } from './target-guard.ts';

/** The secret box's purpose for endpoint secrets (its AAD): a ciphertext cannot be moved elsewhere. */
export const ENDPOINT_SECRET_PURPOSE = 'webhook_endpoint:secret';

export interface NewEndpoint {
  url: string;
  description?: string;
  event_types?: WebhookEventType[] | null;
  conversation_id?: string | null;
  conversation_ids?: string[] | null;
  tags?: string[] | null;
  rate_limit?: number | null;
  headers?: Record<string, string>;
}

export interface EndpointChanges {
  url?: string;
  description?: string;
  event_types?: WebhookEventType[] | null;
  conversation_ids?: string[] | null;
  tags?: string[] | null;
  rate_limit?: number | null;
  headers?: Record<string, string> | null;
  disabled?: boolean;
}

const MESSAGE_ID = /^msg_[0-9a-f]{32}$/;

/** The message log's filters (`listWebhookMessages`), as the API takes them. */
export interface MessageFilter {
  status?: 'pending' | 'succeeded' | 'failed';
  event_type?: WebhookEventType;
  conversation_id?: string;
  since?: string;
  until?: string;
}

/** A bulk retry's set (`createWebhookMessageRetry`): the message log's filters, pending messages excepted. */
export interface RetryFilter extends Omit<MessageFilter, 'status'> {
  status?: 'failed' | 'succeeded';
}

/** Why a new task cannot start while another of the endpoint runs, by the running one's kind. */
const TASK_RUNNING: Record<ResendTaskKind, string> = {
  recover: 'A recovery of this endpoint is running',
  retry: 'A bulk retry of this endpoint is running',
};

export type StatsWindow = WebhookEndpointStatsView['window'];
const STATS_WINDOWS_MS: Record<StatsWindow, number> = { '1h': 3_600_000, '24h': 86_400_000, '7d': 7 * 86_400_000 };

/** The caller's webhook endpoints, their secrets, and their message log. */
export class WebhookEndpointService {
  constructor(
    private readonly em: EntityManager,
    private readonly box: SecretBox,
    private readonly config: OutboundWebhookConfig,
    private readonly queue: OutboundQueue,
  ) {}

  private get knex() {
    return this.em.getConnection().getKnex();
  }

  /** Creates an endpoint; at most `maxEndpoints` per user (409), counted under the user's row lock. */
  async create(principal: Principal, input: NewEndpoint): Promise<WebhookEndpointWithSecret> {
    const url = checkEndpointUrl(input.url, this.config.allowHttp, ['body', 'url']);
    const headers = sealHeaders(this.box, checkHeaders(input.headers ?? {}));
    const secret = generateSecret();
    const row = await this.knex.transaction(async (trx) => {
      await lockOwner(trx, principal.orgId);
      if ((await countEndpoints(trx, principal.orgId)) >= this.config.maxEndpoints) {
        throw new ConflictError(`At most ${this.config.maxEndpoints} webhook endpoints per user`);
      }
      const created = await insertEndpoint(trx, {
        id: randomUUID(),
        ownerId: principal.orgId,
        url,
        description: input.description ?? '',
        eventTypes: input.event_types ?? null,
        conversationId: input.conversation_id ? canonicalUuid(input.conversation_id) : null,
        conversationIds: conversationIdsOf(input.conversation_ids),
        tags: tagsOf(input.tags),
        rateLimit: input.rate_limit ?? null,
        headers,
        secret: this.box.encrypt(secret, ENDPOINT_SECRET_PURPOSE),
      });
      await audit(trx, principal, 'webhook_endpoint.created', created.id, {
        url: created.url,
        event_types: created.event_types,
        conversation_id: created.conversation_id,
        conversation_ids: created.conversation_ids,
        tags: input.tags ?? null,
        rate_limit: created.rate_limit,
        header_names: Object.keys(input.headers ?? {}),
      });
      return created;
    });
    return { ...this.view(row), secret };
  }

  async list(principal: Principal): Promise<WebhookEndpointView[]> {
    return (await listEndpoints(this.em, principal.orgId)).map((row) => this.view(row));
  }

  async get(principal: Principal, id: string): Promise<WebhookEndpointView> {
    return this.view(await this.owned(principal, id));
  }

  /** Changes what the owner may change; enabling again forgets the endpoint's failures. */
  async update(principal: Principal, id: string, changes: EndpointChanges): Promise<WebhookEndpointView> {
    const endpoint = await this.owned(principal, id);
    const url = changes.url === undefined ? endpoint.url : checkEndpointUrl(changes.url, this.config.allowHttp, ['body', 'url']);
    const headers = changes.headers === undefined ? endpoint.headers : sealHeaders(this.box, checkHeaders(changes.headers ?? {}));
    const disabled = changes.disabled ?? endpoint.disabled;
    const enabling = endpoint.disabled && !disabled;
    const row = await this.knex.transaction(async (trx) => {
      const updated = await updateEndpoint(trx, {
        id: endpoint.id,
        ownerId: principal.orgId,
        url,
        description: changes.description ?? endpoint.description,
        eventTypes: changes.event_types === undefined ? endpoint.event_types : changes.event_types,
        conversationIds: changes.conversation_ids === undefined ? endpoint.conversation_ids : conversationIdsOf(changes.conversation_ids),
        tags: changes.tags === undefined ? endpoint.tags : tagsOf(changes.tags),
        rateLimit: changes.rate_limit === undefined ? endpoint.rate_limit : changes.rate_limit,
        headers,
        disabled,
        clearReason: !disabled || changes.disabled === true,
        clearFailures: enabling,
      });
      if (!updated) throw new NotFoundError('Webhook endpoint not found');
      const { headers: newHeaders, ...rest } = changes;
      const summary = newHeaders === undefined ? rest : { ...rest, header_names: Object.keys(newHeaders ?? {}) };
      await audit(trx, principal, 'webhook_endpoint.updated', updated.id, summary as Record<string, unknown>);
      return updated;
    });
    return this.view(row);
  }

  async delete(principal: Principal, id: string): Promise<void> {
    const endpoint = await this.owned(principal, id);
    await this.knex.transaction(async (trx) => {
      await deleteEndpoint(trx, endpoint.id, principal.orgId);
      await audit(trx, principal, 'webhook_endpoint.deleted', endpoint.id, { url: endpoint.url });
    });
  }

  /** A new secret, shown once; the previous one keeps signing for the configured overlap. */
  async rotateSecret(principal: Principal, id: string): Promise<WebhookEndpointWithSecret> {
    const endpoint = await this.owned(principal, id);
    const secret = generateSecret();
    const row = await this.knex.transaction(async (trx) => {
      const rotated = await rotateEndpointSecret(trx, {
        id: endpoint.id,
        ownerId: principal.orgId,
        secret: this.box.encrypt(secret, ENDPOINT_SECRET_PURPOSE),
        overlapMs: this.config.rotationOverlapMs,
      });
      if (!rotated) throw new NotFoundError('Webhook endpoint not found');
      await audit(trx, principal, 'webhook_endpoint.secret_rotated', rotated.id);
      return rotated;
    });
    return { ...this.view(row), secret };
  }

  /** Queues a `webhook.test` message to this endpoint only (no fan-out), delivered as any other. */
  async sendTest(principal: Principal, id: string): Promise<WebhookMessageView> {
    const endpoint = await this.owned(principal, id);
    const row = await this.knex.transaction(async (trx) => {
      const messageId = `msg_${randomUUID().replaceAll('-', '')}`;
      await insertTestMessage(trx, {
        id: messageId,
        ownerId: principal.orgId,
        data: { endpoint_id: endpoint.id, message: 'A test message from the agent platform' },
      });
      await insertTestDelivery(trx, endpoint.id, messageId);
      await this.queue.enqueueDeliveries(trx, [{ message_id: messageId, endpoint_id: endpoint.id, attempt: 1 }]);
      return (await findDelivery(trx, messageId, endpoint.id))!;
    });
    return toMessageView(row);
  }

  /** The endpoint's messages matching `filter`, newest first; the cursor is the last message id of the previous page. */
  async listMessages(
    principal: Principal,
    id: string,
    page: { limit: number; cursor?: string; filter?: MessageFilter },
  ): Promise<{ items: WebhookMessageView[]; next_cursor: string | null }> {
    const filter = page.filter ?? {};
    if (filter.since && filter.until && new Date(filter.until) <= new Date(filter.since)) {
      throw new InvalidInputError('until must be later than since', ['query', 'until'], 'value_error', filter.until);
    }
    const endpoint = await this.owned(principal, id);
    let after: string | undefined;
    if (page.cursor !== undefined) {
      after = Buffer.from(page.cursor, 'base64url').toString('utf8');
      if (!MESSAGE_ID.test(after)) {
        throw new InvalidInputError('Invalid cursor; pass next_cursor from a previous page', ['query', 'cursor'], 'value_error', page.cursor);
      }
    }
    const rows = await listDeliveries(this.em, endpoint.id, { after, limit: page.limit + 1, filter: deliveryFilterOf(filter) });
    const items = rows.slice(0, page.limit);
    const more = rows.length > page.limit;
    return {
      items: items.map(toMessageView),
      next_cursor: more ? Buffer.from(items[items.length - 1]!.id).toString('base64url') : null,
    };
  }

  async listAttempts(principal: Principal, id: string, messageId: string): Promise<WebhookAttemptView[]> {
    const message = await this.ownedMessage(principal, id, messageId);
    return (await listAttempts(this.em, message.id, message.endpoint_id)).map(toAttemptView);
  }

  /** One more attempt at once, whatever the message's state; the same message id. */
  async retry(principal: Principal, id: string, messageId: string): Promise<WebhookMessageView> {
    const message = await this.ownedMessage(principal, id, messageId);
    const row = await this.knex.transaction(async (trx) => {
      const attempts = await markDeliveryPending(trx, message.id, message.endpoint_id);
      // Gone since it was read: its endpoint deleted, or the message log's retention took it.
      if (attempts === undefined) throw new NotFoundError('Message not found');
      await this.queue.enqueueDeliveries(trx, [{ message_id: message.id, endpoint_id: message.endpoint_id, attempt: attempts + 1 }]);
      return { ...message, state: 'pending' as const, attempts, next_attempt_at: new Date() };
    });
    return toMessageView(row);
  }

  /**
   * Starts a recovery of the endpoint's failed messages stored in `[since, until)` (until: now), run by
   * a delivery worker (recovery.ts). 409 when the endpoint is disabled or a task of it runs.
   */
  async recover(principal: Principal, id: string, window: { since: string; until?: string | null }): Promise<WebhookRecoverTaskView> {
    const endpoint = await this.owned(principal, id);
    const since = new Date(window.since);
    const until = window.until ? new Date(window.until) : new Date();
    if (since.getTime() < Date.now() - RECOVER_MAX_AGE_MS) {
      throw new InvalidInputError('Cannot recover messages more than 14 days old', ['body', 'since'], 'value_error', window.since);
    }
    if (until <= since) throw new InvalidInputError('until must be later than since', ['body', 'until'], 'value_error', window.until);
    if (endpoint.disabled) throw new ConflictError('The endpoint is disabled; enable it before recovering its messages');
    const task = await this.startTask(principal, endpoint, 'recover', { status: 'failed', since: since.toISOString(), until: until.toISOString() });
    return toRecoverTaskView(task);
  }

  async getRecoverTask(principal: Principal, id: string, taskId: string): Promise<WebhookRecoverTaskView> {
    return toRecoverTaskView(await this.ownedTask(principal, id, taskId, 'recover'));
  }

  /**
   * Starts a bulk retry of the endpoint's messages the message log's filters select, run in order by a
   * delivery worker as a recovery is (recovery.ts): `failed` by default, within 14 days, 10,000 at most.
   */
  async retryMessages(principal: Principal, id: string, filter: RetryFilter): Promise<WebhookMessageRetryTaskView> {
    const endpoint = await this.owned(principal, id);
    // Absent: 14 days ago, the bound without its allowance for clock skew.
    const since = filter.since ? new Date(filter.since) : new Date(Date.now() - RECOVER_MAX_AGE_MS + 5 * 60_000);
    const until = filter.until ? new Date(filter.until) : new Date();
    if (since.getTime() < Date.now() - RECOVER_MAX_AGE_MS) {
      throw new InvalidInputError('Cannot retry messages more than 14 days old', ['body', 'since'], 'value_error', filter.since);
    }
    if (until <= since) throw new InvalidInputError('until must be later than since', ['body', 'until'], 'value_error', filter.until);
    if (endpoint.disabled) throw new ConflictError('The endpoint is disabled; enable it before retrying its messages');
    const task = await this.startTask(principal, endpoint, 'retry', {
      ...deliveryFilterOf(filter),
      status: filter.status ?? 'failed',
      since: since.toISOString(),
      until: until.toISOString(),
    });
    return toRetryTaskView(task);
  }

  async getRetryTask(principal: Principal, id: string, taskId: string): Promise<WebhookMessageRetryTaskView> {
    return toRetryTaskView(await this.ownedTask(principal, id, taskId, 'retry'));
  }

  /** The endpoint's attempts over the window (from the attempt log) and its state. */
  async stats(principal: Principal, id: string, window: StatsWindow): Promise<WebhookEndpointStatsView> {
    const endpoint = await this.owned(principal, id);
    const row = await endpointAttemptStats(this.em, endpoint.id, STATS_WINDOWS_MS[window]);
    const iso = (value: Date | null) => (value === null ? null : new Date(value).toISOString());
    return {
      window,
      since: iso(row.since)!,
      attempts: row.attempts,
      succeeded: row.succeeded,
      failed: { '3xx': row.failed_3xx, '4xx': row.failed_4xx, '5xx': row.failed_5xx, other: row.failed_other, no_response: row.no_response },
      latency_ms: { p50: row.p50, p99: row.p99 },
      last_success_at: iso(row.last_success_at),
      state: endpoint.disabled ? 'disabled' : endpoint.failing_since ? 'failing' : 'healthy',
      failing_since: endpoint.disabled || endpoint.failing_since ? iso(endpoint.failing_since) : null,
    };
  }

  private view(row: EndpointRow): WebhookEndpointView {
    return toEndpointView(row, headersView(openHeaders(this.box, row.headers)));
  }

  private async owned(principal: Principal, id: string): Promise<EndpointRow> {
    const endpoint = await findOwnedEndpoint(this.em, canonicalUuid(id), principal.orgId);
    // Another user's endpoint is as absent as a missing one: its existence is not the caller's business.
    if (!endpoint) throw new NotFoundError('Webhook endpoint not found');
    return endpoint;
  }

  /**
   * Stores a task re-sending the endpoint's messages `filter` selects, under the endpoint's row lock: one task
   * of an endpoint runs at a time (409). A recovery takes the oldest 10,000; a bulk retry refuses more (422).
   */
  private async startTask(
    principal: Principal,
    endpoint: EndpointRow,
    kind: ResendTaskKind,
    filter: DeliveryFilter & { status: 'failed' | 'succeeded'; since: string; until: string },
  ): Promise<RecoverTaskRow> {
    return this.knex.transaction(async (trx) => {
      await lockEndpoint(trx, endpoint.id);
      const running = await runningTaskKind(trx, endpoint.id);
      if (running) throw new ConflictError(TASK_RUNNING[running]);
      const matched = await countDeliveries(trx, endpoint.id, filter, RECOVER_LIMIT + 1);
      if (kind === 'retry' && matched > RECOVER_LIMIT) {
        throw new InvalidInputError(`More than ${RECOVER_LIMIT} messages match; narrow the filter (a later since, say)`, ['body', 'since'], 'value_error', filter.since);
      }
      const total = Math.min(matched, RECOVER_LIMIT);
      const task = await insertRecoverTask(trx, {
        id: randomUUID(),
        endpointId: endpoint.id,
        kind,
        status: filter.status,
        eventType: filter.eventType ?? null,
        conversationId: filter.conversationId ?? null,
        since: filter.since,
        until: filter.until,
        total,
      });
      const summary = { task_id: task.id, status: task.status, event_type: task.event_type, conversation_id: task.conversation_id, since: task.since, until: task.until, total };
      await audit(trx, principal, kind === 'recover' ? 'webhook_endpoint.recovery_started' : 'webhook_endpoint.bulk_retry_started', endpoint.id, summary);
      return task;
    });
  }

  private async ownedTask(principal: Principal, id: string, taskId: string, kind: ResendTaskKind): Promise<RecoverTaskRow> {
    const endpoint = await this.owned(principal, id);
    const task = await findRecoverTask(this.em, canonicalUuid(taskId), endpoint.id, kind);
    if (!task) throw new NotFoundError(kind === 'recover' ? 'Recovery task not found' : 'Bulk retry task not found');
    return task;
  }

  private async ownedMessage(principal: Principal, id: string, messageId: string): Promise<MessageRow> {
    const endpoint = await this.owned(principal, id);
    const message = await findDelivery(this.em, messageId, endpoint.id);
    if (!message) throw new NotFoundError('Message not found');
    return message;
  }
}

/** The API's message filter as the queries take it (a conversation id in its dashed form). */
function deliveryFilterOf(filter: MessageFilter | RetryFilter): DeliveryFilter {
  return {
    status: filter.status ?? null,
    eventType: filter.event_type ?? null,
    conversationId: filter.conversation_id ? canonicalUuid(filter.conversation_id) : null,
    since: filter.since ?? null,
    until: filter.until ?? null,
  };
}

function conversationIdsOf(ids: string[] | null | undefined): string[] | null {
  return ids ? [...new Set(ids.map(canonicalUuid))] : null;
}

/** `key:value` tags as the object a conversation's `tags` must contain; 422 for a key given twice (no conversation could match). */
function tagsOf(tags: string[] | null | undefined): Record<string, string> | null {
  if (!tags) return null;
  const object: Record<string, string> = {};
  for (const [i, tag] of tags.entries()) {
    const colon = tag.indexOf(':');
    const key = tag.slice(0, colon);
    if (Object.hasOwn(object, key)) throw new InvalidInputError(`The tag key ${key} is given twice`, ['body', 'tags', i], 'value_error', tag);
    object[key] = tag.slice(colon + 1);
  }
  return object;
}

/** Appends the audit row of an endpoint change in its transaction (never the secret). */
function audit(trx: Knex.Transaction, principal: Principal, action: string, endpointId: string, summary?: Record<string, unknown>): Promise<void> {
  return recordAudit(trx, { actor: principal.userId, action, targetType: 'webhook_endpoint', targetId: endpointId, summary, orgId: principal.orgId });
}
