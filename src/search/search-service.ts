import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../../generated/openapi.ts';
import type { Principal } from '../identity/authenticator.ts';
import { eventFilterOf, hitCursor, hitCursorPosition, type EventFilterInput } from '../conversations/search.ts';
import { canonicalUuid } from '../uuid.ts';
import { parseSearchQuery } from './query.ts';
import * as queries from './queries.ts';
import { snippetOf } from './snippet.ts';
import { textOfPayload } from './indexer.ts';

type SearchHitPage = components['schemas']['SearchHitPage'];
type SearchHitCount = components['schemas']['SearchHitCount'];

/** The parameters of `GET /api/v1/search/events` and its count. */
export interface HitSearchInput {
  q: string;
  kinds?: string[];
  sources?: string[];
  conversationId?: string;
  since?: string;
  until?: string;
}

/** Search over the events of the caller's conversations (the index the SearchIndexer fills). */
export class SearchService {
  constructor(private readonly em: EntityManager) {}

  /** A page of hits, newest first, each with a snippet of its searchable text and its matches. */
  async searchEvents(principal: Principal, input: HitSearchInput, limit: number, cursor?: string): Promise<SearchHitPage> {
    const { query, filter } = this.read(input);
    const before = cursor === undefined ? undefined : hitCursorPosition(cursor, { q: query.text, ...filter });
    const [rows, indexedThrough] = await Promise.all([
      queries.hitPage(this.em, principal.orgId, query, filter, limit + 1, before),
      queries.indexedThrough(this.em, principal.orgId, filter.conversationId),
    ]);
    const more = rows.length > limit;
    const items = rows.slice(0, limit).map((row) => ({
      conversation_id: row.conversation_id,
      conversation_title: row.conversation_title,
      seq: row.seq,
      kind: row.kind,
      event_id: row.event_id,
      timestamp: row.timestamp,
      snippet: snippetOf(textOfPayload(row.payload), query),
    }));
    return {
      items,
      next_cursor: more ? hitCursor({ q: query.text, ...filter }, rows[limit - 1]!.ordinal) : null,
      indexed_through: indexedThrough,
    };
  }

  /** How many hits `searchEvents` yields over all its pages. */
  async countEvents(principal: Principal, input: HitSearchInput): Promise<SearchHitCount> {
    const { query, filter } = this.read(input);
    const [count, indexedThrough] = await Promise.all([
      queries.hitCount(this.em, principal.orgId, query, filter),
      queries.indexedThrough(this.em, principal.orgId, filter.conversationId),
    ]);
    return { count, indexed_through: indexedThrough };
  }

  private read(input: HitSearchInput): { query: ReturnType<typeof parseSearchQuery>; filter: queries.HitFilter } {
    const query = parseSearchQuery(input.q);
    const events = eventFilterOf({ kinds: input.kinds, sources: input.sources, since: input.since, until: input.until } as EventFilterInput);
    return {
      query,
      filter: {
        kinds: events.kinds,
        sources: events.sources,
        since: events.since,
        until: events.until,
        conversationId: input.conversationId === undefined ? null : canonicalUuid(input.conversationId),
      },
    };
  }
}
