import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../../generated/openapi.ts';
import { ForbiddenError, InvalidInputError, NotFoundError } from '../errors.ts';
import type { Principal } from '../identity/authenticator.ts';
import type { Logger } from '../logger.ts';
import { isDatabaseUnavailable } from '../db/errors.ts';
import { canonicalUuid, UUID_PATTERN } from '../uuid.ts';
import { stringifyJson } from '../lossless-json.ts';
import { Conversation } from './entities.ts';
import { executionStatusAfter } from './execution-status.ts';
import { toConversationView, toEventPageJson } from './mapper.ts';
import { conversationInfoSummaries } from './conversation-info-service.ts';
import { GroupCommitter, type GroupCommitOptions } from './group-commit.ts';

export type Event = components['schemas']['Event'];
export type EventKind = components['schemas']['EventKind'];

/** A webhook batch ready to store: parallel arrays, one element per event (deltas aside). */
interface IncomingBatch {
  conversationId: string;
  ownerId: string;
  eventIds: string[];
  kinds: string[];
  statuses: (string | null)[];
  /**
   * Each event's JSON text as it is stored (see `src/lossless-json.ts`), in UTF-8. Encoded when the
   * batch arrives: bytes live outside V8's heap, so a batch waiting for its transaction is not
   * copied by every young-generation collection meanwhile, as its strings were.
   */
  payloads: Buffer[];
  /** `delta` notifications for live subscribers (see Migration20261122016000_live_notifications). */
  deltas: string[];
}

/** PostgreSQL refuses a NOTIFY payload of 8000 bytes or more. */
const MAX_NOTIFICATION_BYTES = 7999;

/** What `ingest_event_batches` answers for one batch: the conversation's owner, and how many events were new. */
interface BatchOutcome {
  owner_id: string;
  stored: number;
}

/** A stored event as read back: the payload stays the text that was stored. */
interface StoredEventRow {
  seq: number;
  /** MikroORM's driver leaves timestamps as PostgreSQL writes them. */
  received_at: string;
  payload: string;
}

function encodeCursor(conversation: Conversation): string {
  return Buffer.from(JSON.stringify([conversation.createdAt.toISOString(), conversation.id])).toString('base64url');
}

function decodeCursor(cursor: string): { createdAt: Date; id: string } {
  try {
    const [createdAt, id] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as [string, string];
    const date = new Date(createdAt);
    if (Number.isNaN(date.getTime()) || typeof id !== 'string' || !UUID_PATTERN.test(id)) throw new Error('bad cursor');
    // Only dates PostgreSQL's timestamptz can compare (a crafted year -200000 would be a 500).
    const year = date.getUTCFullYear();
    if (year < 1 || year > 9999) throw new Error('bad cursor');
    return { createdAt: date, id };
  } catch {
    throw new InvalidInputError('Invalid cursor; pass next_cursor from a previous page', ['query', 'cursor'], 'value_error', cursor);
  }
}

/**
 * `[` + the payloads joined by commas + `]`: the group's payloads as one `json` parameter, nothing
 * escaped (a Buffer goes in binary format, which for `json` is that same text).
 */
export function jsonArray(payloads: readonly Buffer[]): Buffer {
  let length = 2 + Math.max(payloads.length - 1, 0);
  for (const payload of payloads) length += payload.length;
  const array = Buffer.allocUnsafe(length);
  let at = 0;
  array[at++] = 0x5b; // [
  payloads.forEach((payload, i) => {
    if (i > 0) array[at++] = 0x2c; // ,
    at += payload.copy(array, at);
  });
  array[at] = 0x5d; // ]
  return array;
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Conversations and their event log: ingestion from the webhook, and reading back. */
export class ConversationService {
  /** Webhook batches arriving while transactions are in flight share the next one. */
  readonly ingestion: GroupCommitter<IncomingBatch, BatchOutcome>;

  constructor(
    private readonly em: EntityManager,
    private readonly log: Logger,
    /** The bounds of the group commit (`config.ingestGroup`: the INGEST_* settings). */
    groupCommit: GroupCommitOptions,
    /** False behind a transaction-pooling PgBouncer, where a statement prepared on one server connection is unknown on the next. */
    private readonly namedStatements = true,
  ) {
    // A database that cannot serve us fails every batch alike: no retrying them one by one.
    this.ingestion = new GroupCommitter((batches) => this.appendEvents(batches), groupCommit, isDatabaseUnavailable);
  }

  /**
   * Stores a webhook batch for `principal`: all or nothing, idempotent by event id, in arrival
   * order. StreamingDeltaEvents are never stored: they are published to live subscribers when the
   * batch commits, except any too large for a notification (counted in `droppedDeltas`).
   *
   * What is stored is taken from `events` before this returns its promise, so the caller may let go
   * of the parsed events while the batch waits for its transaction (the webhook handler does).
   */
  ingest(principal: Principal, conversationId: string, events: Event[]): Promise<{ stored: number; droppedDeltas: number }> {
    // Not async, so that `events` is not kept for the wait; failures still come through the promise.
    try {
      const { batch, droppedDeltas } = this.batchOf(principal, canonicalUuid(conversationId), events);
      return this.store(batch, events.length, droppedDeltas);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  private batchOf(principal: Principal, id: string, events: Event[]): { batch: IncomingBatch; droppedDeltas: number } {
    const batch: IncomingBatch = {
      conversationId: id,
      ownerId: principal.userId,
      eventIds: [],
      kinds: [],
      statuses: [],
      payloads: [],
      deltas: [],
    };
    let droppedDeltas = 0;
    const batchId = randomUUID();
    for (const event of events) {
      if (event.kind === 'StreamingDeltaEvent') {
        const notification = `{"type":"delta","conversation_id":"${id}","batch":"${batchId}","n":${batch.deltas.length},"event":${stringifyJson(event)}}`;
        if (Buffer.byteLength(notification) <= MAX_NOTIFICATION_BYTES) batch.deltas.push(notification);
        else droppedDeltas++;
        continue;
      }
      // An id repeated within the batch is dropped with the group's repeats (see appendEvents).
      event.id ??= randomUUID();
      batch.eventIds.push(event.id);
      batch.kinds.push(event.kind);
      batch.statuses.push(executionStatusAfter(event));
      batch.payloads.push(Buffer.from(stringifyJson(event)));
    }
    return { batch, droppedDeltas };
  }

  private async store(batch: IncomingBatch, received: number, droppedDeltas: number): Promise<{ stored: number; droppedDeltas: number }> {
    const result = await this.ingestion.submit(batch, batch.eventIds.length + batch.deltas.length);
    if (result.owner_id !== batch.ownerId) throw new ForbiddenError('This conversation belongs to another user');
    const { stored } = result;
    this.log.debug({ conversationId: batch.conversationId, received, stored, droppedDeltas }, 'events ingested');
    return { stored, droppedDeltas };
  }

  /**
   * The webhook's whole write for a group of batches: one call of `ingest_event_batches` (see
   * Migration20261123070000_set_based_ingest), one round trip, its own transaction, one outcome per
   * batch in the order given. The batches go ordered by conversation (stable, so each conversation's
   * batches keep their order): concurrent groups then lock conversations in the same order. An event
   * id repeated for one conversation and caller within the group (within one batch, or a redelivery
   * racing the first delivery) goes only with its first occurrence, which is what storing the
   * batches one by one would have kept: the one place where repeats are dropped. It runs on a
   * connection of MikroORM's pool but straight through the driver: on this path the query builder
   * costs a third of the CPU time.
   */
  private async appendEvents(batches: IncomingBatch[]): Promise<BatchOutcome[]> {
    const order = batches.map((_, i) => i);
    order.sort((a, b) => compare(batches[a]!.conversationId, batches[b]!.conversationId));
    const conversations: string[] = [];
    const owners: string[] = [];
    const eventBatches: number[] = [];
    const eventIds: string[] = [];
    const kinds: string[] = [];
    const statuses: (string | null)[] = [];
    const payloads: Buffer[] = [];
    const deltaBatches: number[] = [];
    const deltas: string[] = [];
    const seen = new Set<string>();
    order.forEach((i, position) => {
      const batch = batches[i]!;
      const number = position + 1;
      conversations.push(batch.conversationId);
      owners.push(batch.ownerId);
      batch.eventIds.forEach((eventId, k) => {
        const key = `${batch.conversationId} ${batch.ownerId} ${eventId}`;
        if (seen.has(key)) return;
        seen.add(key);
        eventBatches.push(number);
        eventIds.push(eventId);
        kinds.push(batch.kinds[k]!);
        statuses.push(batch.statuses[k]!);
        payloads.push(batch.payloads[k]!);
      });
      for (const delta of batch.deltas) {
        deltaBatches.push(number);
        deltas.push(delta);
      }
    });
    const client = this.em.getConnection().getKnex().client;
    const connection = await client.acquireConnection();
    let rows: (BatchOutcome & { batch: number })[];
    try {
      const result = await connection.query({
        ...(this.namedStatements ? { name: 'ingest_event_batches' } : {}),
        text: 'select batch, owner_id, stored from ingest_event_batches($1, $2, $3, $4, $5, $6, $7, $8, $9)',
        values: [conversations, owners, eventBatches, eventIds, kinds, statuses, jsonArray(payloads), deltaBatches, deltas],
      });
      rows = result.rows;
    } finally {
      client.releaseConnection(connection);
    }
    const outcomes: BatchOutcome[] = new Array(batches.length);
    for (const row of rows) outcomes[order[row.batch - 1]!] = { owner_id: row.owner_id, stored: row.stored };
    return outcomes;
  }

  /** The conversation, if `principal` owns it. */
  async getConversation(principal: Principal, conversationId: string): Promise<components['schemas']['Conversation']> {
    const conversation = await this.findOwned(principal, conversationId);
    const infos = await conversationInfoSummaries(this.em, [conversation.id]);
    return toConversationView(conversation, infos.get(conversation.id));
  }

  /**
   * A page of stored events in sequence order, after `afterSeq`, as the JSON text of an `EventPage`:
   * each event goes out as the text that was stored, so it reads back exactly as it was sent.
   */
  async listEvents(
    principal: Principal,
    conversationId: string,
    page: { afterSeq: number; limit: number; kind?: EventKind },
  ): Promise<string> {
    const conversation = await this.findOwned(principal, conversationId);
    const rows = await this.em.getConnection().execute<StoredEventRow[]>(
      `select seq, received_at, payload::text as payload from conversation_events
       where conversation_id = ? and seq > ? ${page.kind ? 'and kind = ?' : ''}
       order by seq limit ?`,
      [conversation.id, page.afterSeq, ...(page.kind ? [page.kind] : []), page.limit + 1],
    );
    const more = rows.length > page.limit;
    return toEventPageJson(rows.slice(0, page.limit), more);
  }

  /** The caller's conversations, newest first. */
  async listConversations(
    principal: Principal,
    page: { limit: number; cursor?: string },
  ): Promise<components['schemas']['ConversationPage']> {
    const after = page.cursor ? decodeCursor(page.cursor) : undefined;
    const conversations = await this.em.fork().find(
      Conversation,
      {
        owner: principal.userId,
        ...(after
          ? { $or: [{ createdAt: { $lt: after.createdAt } }, { createdAt: after.createdAt, id: { $lt: after.id } }] }
          : {}),
      },
      { orderBy: [{ createdAt: 'desc' }, { id: 'desc' }], limit: page.limit + 1 },
    );
    const more = conversations.length > page.limit;
    const items = conversations.slice(0, page.limit);
    const infos = await conversationInfoSummaries(this.em, items.map((c) => c.id));
    return {
      items: items.map((conversation) => toConversationView(conversation, infos.get(conversation.id))),
      next_cursor: more ? encodeCursor(items[items.length - 1]!) : null,
    };
  }

  private async findOwned(principal: Principal, conversationId: string): Promise<Conversation> {
    const conversation = await this.em.fork().findOne(Conversation, { id: canonicalUuid(conversationId) });
    if (!conversation) throw new NotFoundError('Conversation not found');
    if (conversation.owner.id !== principal.userId) throw new ForbiddenError('This conversation belongs to another user');
    return conversation;
  }
}
