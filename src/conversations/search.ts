import { createHash } from 'node:crypto';
import type { components } from '../../generated/openapi.ts';
import { InvalidInputError } from '../errors.ts';
import { canonicalUuid, UUID_PATTERN } from '../uuid.ts';
import { isoInstant } from './event-time.ts';
import { parseSearchQuery, type SearchQuery } from '../search/query.ts';

type EventKind = components['schemas']['EventKind'];
type EventSource = components['schemas']['EventSource'];
type ExecutionStatus = components['schemas']['ExecutionStatus'];

/** The filters of `GET …/events` and `…/events/count`, as the query string gives them. */
export interface EventFilterInput {
  afterSeq?: number;
  beforeSeq?: number;
  kinds?: EventKind[];
  ids?: string[];
  sources?: EventSource[];
  since?: string;
  until?: string;
  /** Search syntax (src/search/query.ts): only events whose searchable text matches. */
  q?: string;
}

/** The filters, checked and normalized (instants in UTC, sets sorted). */
export interface EventFilter {
  q: SearchQuery | null;
  afterSeq: number;
  beforeSeq: number | null;
  kinds: string[];
  sources: string[];
  since: string | null;
  until: string | null;
  /** Events' own ids; absent when not asked (so the cursors of queries without it stay as they were). */
  ids?: string[];
}

export type EventOrder = 'asc' | 'desc';

/** The filters of `GET /api/v1/conversations` and `…/count`. */
export interface ConversationFilterInput {
  q?: string;
  statuses?: ExecutionStatus[];
  createdSince?: string;
  createdUntil?: string;
  updatedSince?: string;
  updatedUntil?: string;
  tags?: string[];
  parentConversationId?: string;
}

export interface ConversationFilter {
  q: string | null;
  statuses: string[];
  createdSince: string | null;
  createdUntil: string | null;
  updatedSince: string | null;
  updatedUntil: string | null;
  tags: [string, string][];
  parentConversationId: string | null;
}

export type ConversationSort = 'created_desc' | 'created_asc' | 'updated_desc';

const uniqueSorted = (values: readonly string[] | undefined): string[] => [...new Set(values ?? [])].sort();

function instant(value: string | undefined, parameter: string): string | null {
  if (value === undefined) return null;
  const parsed = isoInstant(value);
  if (parsed === null) {
    throw new InvalidInputError('Input should be a valid ISO 8601 date or date-time', ['query', parameter], 'datetime_from_date_parsing', value);
  }
  return parsed;
}

function range(since: string | null, until: string | null, untilName: string, sinceName: string, input: string | undefined): void {
  if (since !== null && until !== null && until < since) {
    throw new InvalidInputError(`${untilName} must not be before ${sinceName}`, ['query', untilName], 'value_error', input);
  }
}

/** Checks and normalizes the event filters (422 naming the parameter for what the schema cannot say). */
export function eventFilterOf(input: EventFilterInput): EventFilter {
  const afterSeq = input.afterSeq ?? 0;
  const beforeSeq = input.beforeSeq ?? null;
  if (beforeSeq !== null && beforeSeq <= afterSeq) {
    throw new InvalidInputError('before_seq must be greater than after_seq', ['query', 'before_seq'], 'value_error', beforeSeq);
  }
  const since = instant(input.since, 'since');
  const until = instant(input.until, 'until');
  range(since, until, 'until', 'since', input.until);
  const q = input.q === undefined ? null : parseSearchQuery(input.q);
  const ids = uniqueSorted(input.ids);
  return {
    q,
    afterSeq,
    beforeSeq,
    kinds: uniqueSorted(input.kinds),
    sources: uniqueSorted(input.sources),
    since,
    until,
    ...(ids.length > 0 ? { ids } : {}),
  };
}

/** Checks and normalizes the conversation filters. */
export function conversationFilterOf(input: ConversationFilterInput): ConversationFilter {
  const createdSince = instant(input.createdSince, 'created_since');
  const createdUntil = instant(input.createdUntil, 'created_until');
  range(createdSince, createdUntil, 'created_until', 'created_since', input.createdUntil);
  const updatedSince = instant(input.updatedSince, 'updated_since');
  const updatedUntil = instant(input.updatedUntil, 'updated_until');
  range(updatedSince, updatedUntil, 'updated_until', 'updated_since', input.updatedUntil);
  const tags = uniqueSorted(input.tags).map((tag): [string, string] => {
    const colon = tag.indexOf(':');
    return [tag.slice(0, colon), tag.slice(colon + 1)];
  });
  return {
    q: input.q ?? null,
    statuses: uniqueSorted(input.statuses),
    createdSince,
    createdUntil,
    updatedSince,
    updatedUntil,
    tags,
    parentConversationId: input.parentConversationId ? canonicalUuid(input.parentConversationId) : null,
  };
}

/** A short digest of what a cursor is bound to: the query's filters and order. */
function fingerprint(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('base64url').slice(0, 16);
}

function encode(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

function decode(cursor: string): Record<string, unknown> {
  try {
    const value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    if (value && typeof value === 'object' && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // Rendered below.
  }
  throw badCursor(cursor);
}

function badCursor(cursor: string): InvalidInputError {
  return new InvalidInputError('Invalid cursor; pass next_cursor from a previous page', ['query', 'cursor'], 'value_error', cursor);
}

function foreignCursor(cursor: string, what: string): InvalidInputError {
  return new InvalidInputError(
    `This cursor belongs to another query or ${what}; send the query that returned it, or omit the cursor`,
    ['query', 'cursor'],
    'value_error',
    cursor,
  );
}

/** The next-page cursor of an event query: the last sequence number given, bound to the query. */
export function eventCursor(filter: EventFilter, order: EventOrder, lastSeq: number): string {
  return encode({ o: order, f: fingerprint(['events', filter]), p: lastSeq });
}

/** The position a cursor of this same event query continues from (422 for any other cursor). */
export function eventCursorPosition(cursor: string, filter: EventFilter, order: EventOrder): number {
  const value = decode(cursor);
  const position = value.p;
  if (typeof value.o !== 'string' || typeof value.f !== 'string' || !Number.isInteger(position) || (position as number) < 0 || (position as number) > 2147483647) {
    throw badCursor(cursor);
  }
  if (value.o !== order || value.f !== fingerprint(['events', filter])) throw foreignCursor(cursor, 'order');
  return position as number;
}

/** A position in a conversation list: the sort key (UTC instant text, microseconds) and the id. */
export interface ConversationPosition {
  key: string;
  id: string;
}

const INSTANT_TEXT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

export function conversationCursor(filter: ConversationFilter, sort: ConversationSort, position: ConversationPosition): string {
  return encode({ s: sort, f: fingerprint(['conversations', filter]), k: position.key, i: position.id });
}

export function conversationCursorPosition(cursor: string, filter: ConversationFilter, sort: ConversationSort): ConversationPosition {
  const value = decode(cursor);
  const { k: key, i: id } = value;
  if (typeof value.s !== 'string' || typeof value.f !== 'string' || typeof key !== 'string' || typeof id !== 'string') throw badCursor(cursor);
  if (!INSTANT_TEXT.test(key) || isoInstant(key) === null || !UUID_PATTERN.test(id)) throw badCursor(cursor);
  if (value.s !== sort || value.f !== fingerprint(['conversations', filter])) throw foreignCursor(cursor, 'sort');
  return { key, id };
}

/** The next-page cursor of an event search: the last hit's ordinal, bound to the query and its filters. */
export function hitCursor(query: unknown, lastOrdinal: string): string {
  return encode({ f: fingerprint(['hits', query]), p: lastOrdinal });
}

/** The ordinal a cursor of this same search continues below (422 for any other cursor). */
export function hitCursorPosition(cursor: string, query: unknown): string {
  const value = decode(cursor);
  if (typeof value.f !== 'string' || typeof value.p !== 'string' || !/^[1-9]\d{0,17}$/.test(value.p)) throw badCursor(cursor);
  if (value.f !== fingerprint(['hits', query])) throw foreignCursor(cursor, 'filters');
  return value.p;
}
