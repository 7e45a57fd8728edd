import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Knex } from '@mikro-orm/postgresql';
import { auditInsert } from '../audit/audit-service.ts';
import type { OutboundWebhookConfig } from '../config.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import { ConflictError, InvalidInputError, NotFoundError } from '../errors.ts';
import type { Principal } from '../identity/authenticator.ts';
import { canonicalUuid } from '../uuid.ts';
import {
  DELIVERY_SELECT,
  toAttemptView,
  toEndpointView,
  toMessageView,
  type AttemptRow,
  type EndpointRow,
  type MessageRow,
  type WebhookAttemptView,
  type WebhookEndpointView,
  type WebhookEndpointWithSecret,
  type WebhookEventType,
  type WebhookMessageView,
} from './mapper.ts';
import type { OutboundQueue } from './outbound-queue.ts';
import { generateSecret } from './signing.ts';
import { checkEndpointUrl } from './target-guard.ts';

/** The secret box's purpose for endpoint secrets (its AAD): a ciphertext cannot be moved elsewhere. */
export const ENDPOINT_SECRET_PURPOSE = 'webhook_endpoint:secret';

export interface NewEndpoint {
  url: string;
  description?: string;
  event_types?: WebhookEventType[] | null;
  conversation_id?: string | null;
}

export interface EndpointChanges {
  url?: string;
  description?: string;
  event_types?: WebhookEventType[] | null;
  disabled?: boolean;
}

const MESSAGE_ID = /^msg_[0-9a-f]{32}$/;

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
    const secret = generateSecret();
    const row = await this.knex.transaction(async (trx) => {
      await trx.raw('select 1 from users where id = ? for update', [principal.userId]);
      const [{ count }] = (await trx.raw('select count(*)::integer as count from webhook_endpoints where owner_id = ?', [principal.userId])).rows;
      if (count >= this.config.maxEndpoints) throw new ConflictError(`At most ${this.config.maxEndpoints} webhook endpoints per user`);
      const result = await trx.raw(
        `insert into webhook_endpoints (id, owner_id, url, description, event_types, conversation_id, secret)
         values (?, ?, ?, ?, ?::text[], ?, ?) returning *`,
        [
          randomUUID(),
          principal.userId,
          url,
          input.description ?? '',
          input.event_types ?? null,
          input.conversation_id ? canonicalUuid(input.conversation_id) : null,
          this.box.encrypt(secret, ENDPOINT_SECRET_PURPOSE),
        ],
      );
      const created = result.rows[0] as EndpointRow;
      await audit(trx, principal, 'webhook_endpoint.created', created.id, { url: created.url, event_types: created.event_types, conversation_id: created.conversation_id });
      return created;
    });
    return { ...toEndpointView(row), secret };
  }

  async list(principal: Principal): Promise<WebhookEndpointView[]> {
    const rows = (await this.knex.raw('select * from webhook_endpoints where owner_id = ? order by created_at, id', [principal.userId])).rows as EndpointRow[];
    return rows.map(toEndpointView);
  }

  async get(principal: Principal, id: string): Promise<WebhookEndpointView> {
    return toEndpointView(await this.owned(principal, id));
  }

  /** Changes what the owner may change; enabling again forgets the endpoint's failures. */
  async update(principal: Principal, id: string, changes: EndpointChanges): Promise<WebhookEndpointView> {
    const endpoint = await this.owned(principal, id);
    const url = changes.url === undefined ? endpoint.url : checkEndpointUrl(changes.url, this.config.allowHttp, ['body', 'url']);
    const disabled = changes.disabled ?? endpoint.disabled;
    const enabling = endpoint.disabled && !disabled;
    const row = await this.knex.transaction(async (trx) => {
      const result = await trx.raw(
      `update webhook_endpoints set url = ?, description = ?, event_types = ?::text[], disabled = ?,
         disabled_reason = case when ? then null else disabled_reason end,
         failing_since = case when ? then null else failing_since end,
         updated_at = now()
       where id = ? and owner_id = ? returning *`,
      [
        url,
        changes.description ?? endpoint.description,
        changes.event_types === undefined ? endpoint.event_types : changes.event_types,
        disabled,
        !disabled || changes.disabled === true,
        enabling,
        endpoint.id,
        principal.userId,
      ],
      );
      const updated = result.rows[0] as EndpointRow | undefined;
      if (!updated) throw new NotFoundError('Webhook endpoint not found');
      await audit(trx, principal, 'webhook_endpoint.updated', updated.id, changes as Record<string, unknown>);
      return updated;
    });
    return toEndpointView(row);
  }

  async delete(principal: Principal, id: string): Promise<void> {
    const endpoint = await this.owned(principal, id);
    await this.knex.transaction(async (trx) => {
      await trx.raw('delete from webhook_endpoints where id = ? and owner_id = ?', [endpoint.id, principal.userId]);
      await audit(trx, principal, 'webhook_endpoint.deleted', endpoint.id, { url: endpoint.url });
    });
  }

  /** A new secret, shown once; the previous one keeps signing for the configured overlap. */
  async rotateSecret(principal: Principal, id: string): Promise<WebhookEndpointWithSecret> {
    const endpoint = await this.owned(principal, id);
    const secret = generateSecret();
    const row = await this.knex.transaction(async (trx) => {
      const result = await trx.raw(
        `update webhook_endpoints set previous_secret = secret, previous_secret_until = now() + (? * interval '1 millisecond'),
           secret = ?, updated_at = now()
         where id = ? and owner_id = ? returning *`,
        [this.config.rotationOverlapMs, this.box.encrypt(secret, ENDPOINT_SECRET_PURPOSE), endpoint.id, principal.userId],
      );
      const rotated = result.rows[0] as EndpointRow | undefined;
      if (!rotated) throw new NotFoundError('Webhook endpoint not found');
      await audit(trx, principal, 'webhook_endpoint.secret_rotated', rotated.id);
      return rotated;
    });
    return { ...toEndpointView(row), secret };
  }

  /** Queues a `webhook.test` message to this endpoint only (no fan-out), delivered as any other. */
  async sendTest(principal: Principal, id: string): Promise<WebhookMessageView> {
    const endpoint = await this.owned(principal, id);
    const row = await this.knex.transaction(async (trx) => {
      const messageId = `msg_${randomUUID().replaceAll('-', '')}`;
      await trx.raw(
        `insert into webhook_messages (id, owner_id, type, data, fanned_out) values (?, ?, 'webhook.test', ?::jsonb, true)`,
        [messageId, principal.userId, JSON.stringify({ endpoint_id: endpoint.id, message: 'A test message from the agent platform' })],
      );
      await trx.raw(
        `insert into webhook_deliveries (message_id, endpoint_id, next_attempt_at, created_at)
         select id, ?, now(), created_at from webhook_messages where id = ?`,
        [endpoint.id, messageId],
      );
      await this.queue.enqueueDeliveries(trx, [{ message_id: messageId, endpoint_id: endpoint.id, attempt: 1 }]);
      return (await trx.raw(`${DELIVERY_SELECT} where d.message_id = ? and d.endpoint_id = ?`, [messageId, endpoint.id])).rows[0] as MessageRow;
    });
    return toMessageView(row);
  }

  /** The endpoint's messages, newest first; the cursor is the last message id of the previous page. */
  async listMessages(principal: Principal, id: string, page: { limit: number; cursor?: string }): Promise<{ items: WebhookMessageView[]; next_cursor: string | null }> {
    const endpoint = await this.owned(principal, id);
    let after: string | undefined;
    if (page.cursor !== undefined) {
      after = Buffer.from(page.cursor, 'base64url').toString('utf8');
      if (!MESSAGE_ID.test(after)) {
        throw new InvalidInputError('Invalid cursor; pass next_cursor from a previous page', ['query', 'cursor'], 'value_error', page.cursor);
      }
    }
    const rows = (
      await this.knex.raw(
        `${DELIVERY_SELECT} where d.endpoint_id = ?
         ${after ? 'and (d.created_at, d.message_id) < (select c.created_at, c.message_id from webhook_deliveries c where c.endpoint_id = ? and c.message_id = ?)' : ''}
         order by d.created_at desc, d.message_id desc limit ?`,
        [endpoint.id, ...(after ? [endpoint.id, after] : []), page.limit + 1],
      )
    ).rows as MessageRow[];
    const items = rows.slice(0, page.limit);
    const more = rows.length > page.limit;
    return {
      items: items.map(toMessageView),
      next_cursor: more ? Buffer.from(items[items.length - 1]!.id).toString('base64url') : null,
    };
  }

  async listAttempts(principal: Principal, id: string, messageId: string): Promise<WebhookAttemptView[]> {
    const message = await this.ownedMessage(principal, id, messageId);
    const rows = (
      await this.knex.raw('select * from webhook_attempts where message_id = ? and endpoint_id = ? order by attempt', [message.id, message.endpoint_id])
    ).rows as AttemptRow[];
    return rows.map(toAttemptView);
  }

  /** One more attempt at once, whatever the message's state; the same message id. */
  async retry(principal: Principal, id: string, messageId: string): Promise<WebhookMessageView> {
    const message = await this.ownedMessage(principal, id, messageId);
    const row = await this.knex.transaction(async (trx) => {
      const updated = await trx.raw(
        `update webhook_deliveries set state = 'pending', next_attempt_at = now() where message_id = ? and endpoint_id = ? returning attempts`,
        [message.id, message.endpoint_id],
      );
      const { attempts } = updated.rows[0] as { attempts: number };
      await this.queue.enqueueDeliveries(trx, [{ message_id: message.id, endpoint_id: message.endpoint_id, attempt: attempts + 1 }]);
      return { ...message, state: 'pending' as const, attempts, next_attempt_at: new Date() };
    });
    return toMessageView(row);
  }

  private async owned(principal: Principal, id: string): Promise<EndpointRow> {
    const rows = (
      await this.knex.raw('select * from webhook_endpoints where id = ? and owner_id = ?', [canonicalUuid(id), principal.userId])
    ).rows as EndpointRow[];
    // Another user's endpoint is as absent as a missing one: its existence is not the caller's business.
    if (!rows[0]) throw new NotFoundError('Webhook endpoint not found');
    return rows[0];
  }

  private async ownedMessage(principal: Principal, id: string, messageId: string): Promise<MessageRow> {
    const endpoint = await this.owned(principal, id);
    const rows = (
      await this.knex.raw(`${DELIVERY_SELECT} where d.message_id = ? and d.endpoint_id = ?`, [messageId, endpoint.id])
    ).rows as MessageRow[];
    if (!rows[0]) throw new NotFoundError('Message not found');
    return rows[0];
  }
}

/** Appends the audit row of an endpoint change in its transaction (never the secret). */
async function audit(trx: Knex.Transaction, principal: Principal, action: string, endpointId: string, summary?: Record<string, unknown>): Promise<void> {
  const { sql, bindings } = auditInsert({ actor: principal.userId, action, targetType: 'webhook_endpoint', targetId: endpointId, summary });
  await trx.raw(sql, bindings as Knex.RawBinding[]);
}
