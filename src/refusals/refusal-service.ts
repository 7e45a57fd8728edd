import { createHash } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { ConflictError, ForbiddenError, InvalidInputError, NotFoundError } from '../errors.ts';
import { UUID_PATTERN, canonicalUuid } from '../uuid.ts';
import { refusedEventIds, type RefusalReason } from './refusal.ts';
import { toRefusedDeliveryView, type RefusedDeliveryRow, type RefusedDeliveryView } from './mapper.ts';
import {
  conversationOwner,
  countRepeatedRefusal,
  insertRefusal,
  markRefusedAgain,
  markReplayed,
  notifyOnceAnHour,
  refusedDeliveryPage,
  replayableRow,
} from './queries.ts';

/** One refused webhook batch, as the recorder saw it. */
export interface RefusedBatch {
  /** The organization whose session API key sent it. */
  ownerId: string;
  /** The user who made that key. */
  senderId: string;
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
  /** Only resolved (true) or unresolved (false) refusals; undefined: both. */
  resolved?: boolean;
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
    const key = { ownerId: batch.ownerId, conversationId: batch.conversationId, fingerprint, senderId: batch.senderId };
    const conversationKey = UUID_PATTERN.test(batch.conversationId) ? canonicalUuid(batch.conversationId) : null;
    const row =
      (await countRepeatedRefusal(this.em, key, batch.refusal)) ??
      (await insertRefusal(this.em, {
        ...key,
        conversationKey,
        refusal: batch.refusal,
        body: batch.body ?? null,
        bodyBytes: batch.body?.length ?? batch.announcedBytes ?? null,
        eventCount: batch.eventCount,
        eventIds: refusedEventIds(batch.body),
      }));
    const id = Number(row.id);
    const { status, reason, detail } = batch.refusal;
    const notified =
      conversationKey !== null &&
      (await notifyOnceAnHour(this.em, batch.ownerId, conversationKey, { conversation_id: conversationKey, refused_delivery_id: id, status, reason, detail, attempts: row.attempts }));
    return { id, attempts: row.attempts, notified };
  }

  /** One page, newest (most recently first refused) first. */
  async list(query: RefusedDeliveryQuery): Promise<{ items: RefusedDeliveryView[]; next_cursor: string | null }> {
    const conversationKey = query.conversationId === undefined ? null : canonicalUuid(query.conversationId);
    if (query.ownerId !== undefined && conversationKey !== null) {
      // A refused batch may name a conversation that does not exist yet: that one is the caller's to see.
      const owner = await conversationOwner(this.em, conversationKey);
      if (owner !== undefined && owner !== query.ownerId) throw new ForbiddenError('This conversation belongs to another organization');
    }
    const scope = cursorScope(query.ownerId, conversationKey, query.since, query.resolved);
    const beforeId = query.cursor === undefined ? null : cursorPosition(query.cursor, scope);
    const filter = { ownerId: query.ownerId ?? null, conversationKey, since: query.since ?? null, resolved: query.resolved ?? null, beforeId };
    const rows = await refusedDeliveryPage(this.em, filter, query.limit + 1);
    const items = rows.slice(0, query.limit).map(toRefusedDeliveryView);
    const more = rows.length > query.limit;
    return { items, next_cursor: more ? cursorOf(scope, items[items.length - 1]!.id) : null };
  }

  /** The kept body of a refusal (404 when there is none, 409 when its body was never read). */
  async replayable(id: number): Promise<ReplayableDelivery> {
    const row = await replayableRow(this.em, id);
    if (!row) throw new NotFoundError('Refused delivery not found');
    if (!row.body) {
      throw new ConflictError('The body of this refused delivery was not read (it announced more than the server reads); it cannot be replayed');
    }
    return { id, ownerId: row.owner_id, conversationId: row.conversation_id, body: row.body };
  }

  /** Marks a refusal as stored by a replay. */
  async replayed(id: number): Promise<RefusedDeliveryView> {
    return viewOrNotFound(await markReplayed(this.em, id));
  }

  /** A replay refused again: the item says why, as of now. */
  async refusedAgain(id: number, refusal: RefusalReason): Promise<RefusedDeliveryView> {
    return viewOrNotFound(await markRefusedAgain(this.em, id, refusal));
  }
}

function viewOrNotFound(row: RefusedDeliveryRow | undefined): RefusedDeliveryView {
  if (!row) throw new NotFoundError('Refused delivery not found');
  return toRefusedDeliveryView(row);
}

/** What a cursor is bound to: the query's scope and filters. */
function cursorScope(ownerId: string | undefined, conversationKey: string | null, since: Date | undefined, resolved: boolean | undefined): string {
  const filters = [ownerId ?? null, conversationKey, since?.toISOString() ?? null, ...(resolved === undefined ? [] : [resolved])];
  return createHash('sha256').update(JSON.stringify(filters)).digest('base64url').slice(0, 12);
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
