import { createHash } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { sqlRows } from '../db/sql.ts';
import { ConflictError, ForbiddenError, InvalidInputError, NotFoundError } from '../errors.ts';
import { UUID_PATTERN, canonicalUuid } from '../uuid.ts';
import type { RefusalReason } from './refusal.ts';
import {
  REFUSED_DELIVERY_COLUMNS,
  toRefusedDeliveryView,
  type RefusedDeliveryRow,
  type RefusedDeliveryView,
} from './mapper.ts';

/** One refused webhook batch, as the recorder saw it. */
export interface RefusedBatch {
  ownerId: string;
  /** The conversation id exactly as it was in the path. */
  conversationId: string;
  refusal: RefusalReason;
  /** The body as read; undefined when it was not read (it announced more than the server reads). */
  body: Buffer | undefined;
  /** `Content-Length`, for a body that was not read. */
  announcedBytes: number | undefined;
  /** Events in the batch; null when the body is not a JSON array (or was not read). */
  eventCount: number | null;
}

/** What recording one refusal did. */
export interface RecordedRefusal {
  id: number;
  attempts: number;
  /** True when a `conversation.delivery_refused` message was stored for the owner's endpoints. */
  notified: boolean;
}

export interface RefusedDeliveryQuery {
  /** Only this owner's (undefined: every user's, for administrators). */
  ownerId?: string;
  conversationId?: string;
  since?: Date;
  limit: number;
  cursor?: string;
}

/** A kept body, for a replay under today's rules. */
export interface ReplayableDelivery {
  id: number;
  ownerId: string;
  conversationId: string;
  body: Buffer;
}

/**
 * The refusal ledger (docs/agent-server.md, "Seeing and replaying refusals"). Written only for
 * refused batches; read by its lists, by conversation views (`summaries`) and by replays.
 */
export class RefusalService {
  constructor(private readonly em: EntityManager) {}

  /**
   * Counts a refusal: a body already refused for this caller and conversation id adds an attempt to
   * its row (without sending the body to the database again); a new one is inserted. Then, at most once
   * an hour per conversation, the `conversation.delivery_refused` outbound message.
   */
  async record(batch: RefusedBatch): Promise<RecordedRefusal> {
    const fingerprint = batch.body
      ? `sha256:${createHash('sha256').update(batch.body).digest('hex')}`
      : `unread:${batch.announcedBytes ?? 'unknown'}`;
    const { status, reason, detail } = batch.refusal;
    const [seenBefore] = await sqlRows<{ id: string; attempts: number }>(
      this.em,
      `update refused_deliveries set attempts = attempts + 1, last_seen_at = now(), status = $4, reason = $5, detail = $6
       where owner_id = $1 and conversation_id = $2 and fingerprint = $3 returning id, attempts`,
      [batch.ownerId, batch.conversationId, fingerprint, status, reason, detail],
    );
    const conversationKey = UUID_PATTERN.test(batch.conversationId) ? canonicalUuid(batch.conversationId) : null;
    const [row] = seenBefore
      ? [seenBefore]
      : await sqlRows<{ id: string; attempts: number }>(
          this.em,
          `insert into refused_deliveries as r
             (owner_id, conversation_id, conversation_key, status, reason, detail, fingerprint, body, body_bytes, event_count)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
           on conflict (owner_id, conversation_id, fingerprint) do update
             set attempts = r.attempts + 1, last_seen_at = now(), status = excluded.status, reason = excluded.reason, detail = excluded.detail
           returning id, attempts`,
          [
            batch.ownerId,
            batch.conversationId,
            conversationKey,
            status,
            reason,
            detail,
            fingerprint,
            batch.body ?? null,
            batch.body?.length ?? batch.announcedBytes ?? null,
            batch.eventCount,
          ],
        );
    const id = Number(row!.id);
    const notified = conversationKey !== null && (await this.notify(batch.ownerId, conversationKey, id, batch.refusal, row!.attempts));
    return { id, attempts: row!.attempts, notified };
  }

  /** One page, newest (most recently first refused) first. */
  async list(query: RefusedDeliveryQuery): Promise<{ items: RefusedDeliveryView[]; next_cursor: string | null }> {
    const conversationKey = query.conversationId === undefined ? null : canonicalUuid(query.conversationId);
    if (query.ownerId !== undefined && conversationKey !== null) await this.checkNotAnotherUsers(query.ownerId, conversationKey);
    const scope = cursorScope(query.ownerId, conversationKey, query.since);
    const beforeId = query.cursor === undefined ? null : cursorPosition(query.cursor, scope);
    const rows = await sqlRows<RefusedDeliveryRow>(
      this.em,
      `select ${REFUSED_DELIVERY_COLUMNS} from refused_deliveries
       where ($1::uuid is null or owner_id = $1) and ($2::uuid is null or conversation_key = $2)
         and ($3::timestamptz is null or last_seen_at >= $3) and ($4::bigint is null or id < $4)
       order by id desc limit $5`,
      [query.ownerId ?? null, conversationKey, query.since ?? null, beforeId, query.limit + 1],
    );
    const items = rows.slice(0, query.limit).map(toRefusedDeliveryView);
    const more = rows.length > query.limit;
    return { items, next_cursor: more ? cursorOf(scope, items[items.length - 1]!.id) : null };
  }

  /** 403 for a conversation another user owns (a refused batch may name one that does not exist yet: that is the caller's). */
  private async checkNotAnotherUsers(ownerId: string, conversationId: string): Promise<void> {
    const [row] = await sqlRows<{ owner_id: string }>(this.em, 'select owner_id from conversations where id = $1', [conversationId]);
    if (row && row.owner_id !== ownerId) throw new ForbiddenError('This conversation belongs to another user');
  }

  /** The kept body of a refusal (404 when there is none, 409 when its body was never read). */
  async replayable(id: number): Promise<ReplayableDelivery> {
    const [row] = await sqlRows<{ owner_id: string; conversation_id: string; body: Buffer | null }>(
      this.em,
      'select owner_id, conversation_id, body from refused_deliveries where id = $1',
      [id],
    );
    if (!row) throw new NotFoundError('Refused delivery not found');
    if (!row.body) {
      throw new ConflictError('The body of this refused delivery was not read (it announced more than the server reads); it cannot be replayed');
    }
    return { id, ownerId: row.owner_id, conversationId: row.conversation_id, body: row.body };
  }

  /** Marks a refusal as stored by a replay. */
  async replayed(id: number): Promise<RefusedDeliveryView> {
    return this.update(id, 'replayed_at = now()', []);
  }

  /** A replay refused again: the item says why, as of now. */
  async refusedAgain(id: number, refusal: RefusalReason): Promise<RefusedDeliveryView> {
    return this.update(id, 'status = $2, reason = $3, detail = $4', [refusal.status, refusal.reason, refusal.detail]);
  }

  private async update(id: number, set: string, values: unknown[]): Promise<RefusedDeliveryView> {
    const [row] = await sqlRows<RefusedDeliveryRow>(
      this.em,
      `update refused_deliveries set ${set} where id = $1 returning ${REFUSED_DELIVERY_COLUMNS}`,
      [id, ...values],
    );
    if (!row) throw new NotFoundError('Refused delivery not found');
    return toRefusedDeliveryView(row);
  }

  /** Stores the outbound message unless one went out for this conversation within the hour (any instance). */
  private async notify(ownerId: string, conversationId: string, id: number, refusal: RefusalReason, attempts: number): Promise<boolean> {
    const data = { conversation_id: conversationId, refused_delivery_id: id, status: refusal.status, reason: refusal.reason, detail: refusal.detail, attempts };
    const rows = await sqlRows<{ queued: number }>(
      this.em,
      `with notice as (
         insert into delivery_refusal_notices as n (owner_id, conversation_id, sent_at) values ($1, $2, now())
         on conflict (owner_id, conversation_id) do update set sent_at = now() where n.sent_at <= now() - interval '1 hour'
         returning 1
       )
       select webhook_enqueue($1, $2, 'conversation.delivery_refused', $3::jsonb) as queued from notice`,
      [ownerId, conversationId, JSON.stringify(data)],
    );
    return rows[0]?.queued === 1;
  }
}

/** What a cursor is bound to: the query's scope and filters. */
function cursorScope(ownerId: string | undefined, conversationKey: string | null, since: Date | undefined): string {
  return createHash('sha256').update(JSON.stringify([ownerId ?? null, conversationKey, since?.toISOString() ?? null])).digest('base64url').slice(0, 12);
}

function cursorOf(scope: string, lastId: number): string {
  return Buffer.from(JSON.stringify({ s: scope, b: lastId })).toString('base64url');
}

function cursorPosition(cursor: string, scope: string): number {
  let value: { s?: unknown; b?: unknown } | undefined;
  try {
    value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as typeof value;
  } catch {
    value = undefined;
  }
  if (!value || typeof value !== 'object' || value.s !== scope || !Number.isSafeInteger(value.b) || (value.b as number) < 1) {
    throw new InvalidInputError('Invalid cursor; pass next_cursor from a previous page of the same query', ['query', 'cursor'], 'value_error', cursor);
  }
  return value.b as number;
}
