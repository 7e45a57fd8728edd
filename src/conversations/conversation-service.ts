import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../../generated/openapi.ts';
import { ForbiddenError, NotFoundError } from '../errors.ts';
import type { Principal } from '../identity/authenticator.ts';
import type { Logger } from '../logger.ts';
import { isDatabaseUnavailable } from '../db/errors.ts';
import { canonicalUuid } from '../uuid.ts';
import { stringifyJson } from '../lossless-json.ts';
import { executionStatusAfter } from './execution-status.ts';
import { combinedMetricsOf, statsOfStateUpdate } from './combined-metrics.ts';
import { isoInstant } from './event-time.ts';
import { eventPageBody, toStoredEventJson } from './mapper.ts';
import { searchableTitle } from './conversation-info-service.ts';
import { conversationExport } from './export.ts';
import { readConversationView, viewsOf } from './views.ts';
import * as queries from './queries.ts';
import {
  conversationCursor,
  conversationCursorPosition,
  conversationFilterOf,
  eventCursor,
  eventCursorPosition,
  eventFilterOf,
  type ConversationFilterInput,
  type ConversationSort,
  type EventFilter,
  type EventFilterInput,
  type EventOrder,
} from './search.ts';
import { indexedThrough as searchIndexedThrough } from '../search/queries.ts';
import { GroupCommitter, type GroupCommitOptions } from './group-commit.ts';

export type Event = components['schemas']['Event'];
export type EventKind = components['schemas']['EventKind'];
type Unrecognized = components['schemas']['Unrecognized'];
type ConversationView = components['schemas']['Conversation'];
type ConversationPage = components['schemas']['ConversationPage'];

/** One page of `listEvents` (and `listVisibleEvents`): filters as given, order, size, and the cursor of the page before. */
export interface EventPageRequest {
  filter: EventFilterInput;
  order: EventOrder;
  limit: number;
  cursor?: string;
}

/** A webhook batch ready to store: parallel arrays, one element per event (deltas aside). */
interface IncomingBatch {
  conversationId: string;
  ownerId: string;
  eventIds: string[];
  kinds: string[];
  statuses: (string | null)[];
  /** Each event's own `timestamp` as an instant, or null to take the time it is received (`event-time.ts`). */
  eventTimes: (string | null)[];
  sources: (string | null)[];
  /** Each event's stored JSON text in UTF-8, encoded on arrival: a waiting batch's bytes are not copied by every scavenge (docs/performance.md, "Waiting with bytes only"). */
  payloads: Buffer[];
  /** `delta` notifications for live subscribers (published by `ingest_event_batches`). */
  deltas: string[];
  /** Each stored event's `unrecognized` marker (JSON text) or null; only for a batch admitted by `accept-unknown`. */
  unrecognized?: (string | null)[];
}

/** PostgreSQL refuses a NOTIFY payload of 8000 bytes or more. */
const MAX_NOTIFICATION_BYTES = 7999;

/** Stored bytes past which a batch is committed in a transaction of its own (see `store`). */
const COMMIT_ALONE_ABOVE_BYTES = 8 * 1024 * 1024;

/** What `ingest_event_batches` answers for one batch: the conversation's owner, and how many events were new. */
interface BatchOutcome {
  owner_id: string;
  stored: number;
}

/** The values of `EventSource`: all that the `source` column (`varchar(16)`) takes from an unrecognized event. */
const EVENT_SOURCES: ReadonlySet<unknown> = new Set(['agent', 'user', 'environment', 'hook']);

/**
 * Adds the `accept-unknown` verdicts to a batch, one per stored event (deltas are not stored). An
 * unrecognized event's `source` is kept as a filter value only when it is one the spec knows.
 */
function markUnrecognized(batch: IncomingBatch, events: readonly Event[], verdicts: readonly (Unrecognized | null)[]): void {
  batch.unrecognized = [];
  let stored = 0;
  events.forEach((event, i) => {
    if (event.kind === 'StreamingDeltaEvent') return;
    const verdict = verdicts[i] ?? null;
    batch.unrecognized!.push(verdict === null ? null : asciiJson(verdict));
    if (verdict !== null && !EVENT_SOURCES.has(event.source)) batch.sources[stored] = null;
    stored++;
  });
}

/** JSON text with every non-ASCII character escaped: a `StoredEvent`'s head is written as Latin-1 (`storedEventHead`). */
function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Conversations and their event log: ingestion from the webhook, and reading back. */
export class ConversationService {
  /** Webhook batches arriving while transactions are in flight share the next one. */
  readonly ingestion: GroupCommitter<IncomingBatch, BatchOutcome>;
  /** A batch this heavy fills a group alone (`maxEvents`). */
  private readonly fullGroupEvents: number;

  constructor(
    private readonly em: EntityManager,
    private readonly log: Logger,
    /** The bounds of the group commit (`config.ingestGroup`: the INGEST_* settings). */
    groupCommit: GroupCommitOptions,
  ) {
    // A database that cannot serve us fails every batch alike: no retrying them one by one.
    this.ingestion = new GroupCommitter((batches) => this.appendEvents(batches), groupCommit, isDatabaseUnavailable);
    this.fullGroupEvents = groupCommit.maxEvents;
  }

  /**
   * Stores a webhook batch for `principal`: all or nothing, idempotent by event id, in arrival order;
   * StreamingDeltaEvents are only published (one too large for a notification is counted in `droppedDeltas`).
   * Takes what it stores from `events` before returning, so the caller may drop them while the batch waits.
   * `unrecognized` (the `accept-unknown` policy): per event, what the contract does not know of it, stored beside it.
   * An empty batch stores nothing and creates no conversation.
   */
  ingest(
    principal: Pick<Principal, 'orgId'>,
    conversationId: string,
    events: Event[],
    unrecognized?: readonly (Unrecognized | null)[],
  ): Promise<{ stored: number; droppedDeltas: number }> {
    if (events.length === 0) return Promise.resolve({ stored: 0, droppedDeltas: 0 });
    // Not async, so that `events` is not kept for the wait; failures still come through the promise.
    try {
      const { batch, droppedDeltas, stats } = this.batchOf(principal, canonicalUuid(conversationId), events);
      if (unrecognized) markUnrecognized(batch, events, unrecognized);
      const stored = this.store(batch, events.length, droppedDeltas);
      return stats === undefined ? stored : stored.then((result) => this.updateMetrics(batch.conversationId, stats).then(() => result));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** The batch to store; `stats`: the last `stats` a state update of the batch carries (see `updateMetrics`). */
  private batchOf(principal: Pick<Principal, 'orgId'>, id: string, events: Event[]): { batch: IncomingBatch; droppedDeltas: number; stats: unknown } {
    const batch: IncomingBatch = {
      conversationId: id,
      ownerId: principal.orgId,
      eventIds: [],
      kinds: [],
      statuses: [],
      eventTimes: [],
      sources: [],
      payloads: [],
      deltas: [],
    };
    let droppedDeltas = 0;
    let stats: unknown;
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
      stats = statsOfStateUpdate(event) ?? stats;
      batch.eventTimes.push(isoInstant(event.timestamp));
      batch.sources.push(typeof event.source === 'string' ? event.source : null);
      batch.payloads.push(Buffer.from(stringifyJson(event)));
    }
    return { batch, droppedDeltas, stats };
  }

  /**
   * A `ConversationStateUpdateEvent` with `key: "stats"` keeps the conversation's metrics current
   * between two ConversationInfo posts, derived as from an info's `stats`; shown, never charged (docs/billing.md).
   */
  private async updateMetrics(conversationId: string, stats: unknown): Promise<void> {
    const metrics = combinedMetricsOf(stats);
    if (metrics !== null) await queries.storeMetrics(this.em, conversationId, JSON.stringify(metrics));
  }

  private async store(batch: IncomingBatch, received: number, droppedDeltas: number): Promise<{ stored: number; droppedDeltas: number }> {
    // A huge batch (a single large event) fills a group of its own: its transaction carries no other batch's payloads.
    const bytes = batch.payloads.reduce((sum, payload) => sum + payload.length, 0);
    const weight = bytes > COMMIT_ALONE_ABOVE_BYTES ? this.fullGroupEvents : batch.eventIds.length + batch.deltas.length;
    const result = await this.ingestion.submit(batch, weight);
    if (result.owner_id !== batch.ownerId) throw new ForbiddenError('This conversation belongs to another organization');
    const { stored } = result;
    this.log.debug({ conversationId: batch.conversationId, received, stored, droppedDeltas }, 'events ingested');
    return { stored, droppedDeltas };
  }

  /**
   * A group of batches in one call of `ingest_event_batches`, one outcome per batch in the order given.
   * Ordered by conversation (stable), so concurrent groups lock conversations in one order; an event id
   * repeated for one conversation and caller goes only with its first occurrence (the one place repeats are dropped).
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
    const eventTimes: (string | null)[] = [];
    const sources: (string | null)[] = [];
    const payloads: Buffer[] = [];
    const deltaBatches: number[] = [];
    const deltas: string[] = [];
    // Only when a batch of the group has unrecognized events: strict groups pass null.
    const markers = batches.some((batch) => batch.unrecognized) ? ([] as Buffer[]) : undefined;
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
        eventTimes.push(batch.eventTimes[k]!);
        sources.push(batch.sources[k]!);
        payloads.push(batch.payloads[k]!);
        markers?.push(Buffer.from(batch.unrecognized?.[k] ?? 'null'));
      });
      for (const delta of batch.deltas) {
        deltaBatches.push(number);
        deltas.push(delta);
      }
    });
    const rows = await queries.ingestEventBatches(this.em, {
      conversations,
      owners,
      eventBatches,
      eventIds,
      kinds,
      statuses,
      payloads,
      deltaBatches,
      deltas,
      eventTimes,
      sources,
      markers,
    });
    const outcomes: BatchOutcome[] = new Array(batches.length);
    for (const row of rows) outcomes[order[row.batch - 1]!] = { owner_id: row.owner_id, stored: row.stored };
    return outcomes;
  }

  /** The conversation, if `principal` owns it. */
  async getConversation(principal: Principal, conversationId: string): Promise<ConversationView> {
    const read = await readConversationView(this.em, canonicalUuid(conversationId));
    if (!read) throw new NotFoundError('Conversation not found');
    if (read.ownerId !== principal.orgId) throw new ForbiddenError('This conversation belongs to another organization');
    return read.view;
  }

  /** Sets the owner's title (see `renameConversation` in the spec for which title wins when). */
  async renameConversation(principal: Principal, conversationId: string, title: string): Promise<ConversationView> {
    const id = canonicalUuid(conversationId);
    const renamed = await queries.renameConversation(this.em, id, principal.orgId, title, searchableTitle(title));
    if (!renamed) await this.findOwned(principal, id);
    return this.getConversation(principal, id);
  }

  /**
   * A page of stored events, as the JSON bytes of an `EventPage`: each event goes out as the text
   * that was stored, so it reads back exactly as it was sent.
   */
  async listEvents(principal: Principal, conversationId: string, page: EventPageRequest): Promise<Buffer> {
    const filter = eventFilterOf(page.filter);
    // The cursor's position narrows the query's own bound on the side it continues from.
    const position = page.cursor === undefined ? undefined : eventCursorPosition(page.cursor, filter, page.order);
    const conversation = await this.findOwned(principal, conversationId);
    return this.eventPageOf(conversation.id, filter, position, page);
  }

  /**
   * `listEvents` for a reader who may see only some kinds (a share link): the same paging over the
   * `visibleKinds` among those asked for, every payload through `redact`. The caller has found the conversation.
   */
  async listVisibleEvents(
    conversationId: string,
    page: EventPageRequest,
    visible: { kinds: ReadonlySet<string>; redact: (payload: string) => string },
  ): Promise<Buffer> {
    const asked = eventFilterOf(page.filter);
    const kinds = (asked.kinds.length === 0 ? [...visible.kinds].sort() : asked.kinds).filter((kind) => visible.kinds.has(kind));
    const filter: EventFilter = { ...asked, kinds };
    const position = page.cursor === undefined ? undefined : eventCursorPosition(page.cursor, filter, page.order);
    // Only hidden kinds asked for: an empty filter would mean every kind.
    if (kinds.length === 0) return eventPageBody([], { afterSeq: null, beforeSeq: null, cursor: null });
    return this.eventPageOf(conversationId, filter, position, page, visible.redact);
  }

  private async eventPageOf(
    conversationId: string,
    filter: EventFilter,
    position: number | undefined,
    page: EventPageRequest,
    payloadOf?: (payload: string) => string,
  ): Promise<Buffer> {
    const bounded: EventFilter =
      position === undefined
        ? filter
        : page.order === 'asc'
          ? { ...filter, afterSeq: Math.max(filter.afterSeq, position) }
          : { ...filter, beforeSeq: Math.min(filter.beforeSeq ?? position, position) };
    const [rows, indexedThrough] = await Promise.all([
      queries.eventPage(this.em, conversationId, bounded, page.order, page.limit + 1),
      filter.q === null ? undefined : searchIndexedThrough(this.em, null, conversationId),
    ]);
    const more = rows.length > page.limit;
    const items = rows.slice(0, page.limit);
    const last = items[items.length - 1]?.seq;
    return eventPageBody(items, {
      afterSeq: more && page.order === 'asc' ? last! : null,
      beforeSeq: more && page.order === 'desc' ? last! : null,
      cursor: more ? eventCursor(filter, page.order, last!) : null,
      ...(indexedThrough === undefined ? {} : { indexedThrough }),
    }, payloadOf);
  }

  /** How many events `listEvents` yields with these filters, over all its pages. */
  async countEvents(principal: Principal, conversationId: string, input: EventFilterInput): Promise<number> {
    const filter = eventFilterOf(input);
    const conversation = await this.findOwned(principal, conversationId);
    // Sequence numbers are dense (1…event_count): a range alone is arithmetic.
    if (filter.q === null && filter.kinds.length === 0 && !filter.ids && filter.sources.length === 0 && filter.since === null && filter.until === null) {
      const top = Math.min(conversation.event_count, (filter.beforeSeq ?? Infinity) - 1);
      return Math.max(0, top - filter.afterSeq);
    }
    return queries.eventCount(this.em, conversation.id, filter);
  }

  /** One stored event by its id, as the JSON text of a `StoredEvent`. */
  async getEvent(principal: Principal, conversationId: string, eventId: string): Promise<string> {
    const conversation = await this.findOwned(principal, conversationId);
    const row = await queries.storedEvent(this.em, conversation.id, eventId);
    if (!row) throw new NotFoundError('Event not found in this conversation');
    return toStoredEventJson(row);
  }

  /** A page of the caller's conversations, filtered and sorted. */
  async listConversations(
    principal: Principal,
    page: { filter: ConversationFilterInput; sort: ConversationSort; limit: number; cursor?: string },
  ): Promise<ConversationPage> {
    const filter = conversationFilterOf(page.filter);
    const after = page.cursor === undefined ? undefined : conversationCursorPosition(page.cursor, filter, page.sort);
    const rows = await queries.conversationPage(this.em, principal.orgId, filter, page.sort, page.limit + 1, after);
    const more = rows.length > page.limit;
    const items = rows.slice(0, page.limit);
    const last = items[items.length - 1];
    return {
      items: await viewsOf(this.em, principal.orgId, items),
      next_cursor: more ? conversationCursor(filter, page.sort, { key: last!.sort_key, id: last!.id }) : null,
    };
  }

  /** How many conversations `listConversations` yields with these filters, over all its pages. */
  async countConversations(principal: Principal, input: ConversationFilterInput): Promise<number> {
    const filter = conversationFilterOf(input);
    return queries.conversationCount(this.em, principal.orgId, filter);
  }

  /**
   * The whole conversation as NDJSON chunks of whole lines (see `conversationExport`), once `principal` is
   * known to own it: a 403 or 404 comes before anything is streamed.
   */
  async exportConversation(principal: Principal, conversationId: string): Promise<{ id: string; chunks: AsyncIterable<Buffer> }> {
    const conversation = await this.findOwned(principal, conversationId);
    return { id: conversation.id, chunks: conversationExport(this.em, conversation.id) };
  }

  private async findOwned(principal: Principal, conversationId: string): Promise<{ id: string; event_count: number }> {
    const id = canonicalUuid(conversationId);
    const conversation = await queries.conversationOwner(this.em, id);
    if (!conversation) throw new NotFoundError('Conversation not found');
    if (conversation.owner_id !== principal.orgId) throw new ForbiddenError('This conversation belongs to another organization');
    return conversation;
  }
}
