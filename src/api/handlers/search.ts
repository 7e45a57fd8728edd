import type { operations } from '../../../generated/openapi.ts';
import type { HitSearchInput, SearchService } from '../../search/search-service.ts';
import { principalOf, respond, type OperationHandlers } from '../context.ts';

type SearchQuery = NonNullable<operations['searchEvents']['parameters']['query']>;
type CountQuery = NonNullable<operations['countSearchEvents']['parameters']['query']>;

const list = <T>(value: T[] | T | undefined): T[] | undefined => (value === undefined ? undefined : Array.isArray(value) ? value : [value]);

function searchInputOf(query: CountQuery): HitSearchInput {
  return {
    q: query.q,
    kinds: list(query.kind),
    sources: list(query.source),
    conversationId: query.conversation_id,
    since: query.since,
    until: query.until,
  };
}

/** Handlers of the `search` tag: search inside the caller's conversations. */
export function searchHandlers(search: SearchService): OperationHandlers {
  return {
    async searchEvents(operation, ctx) {
      const query = operation.request.query as SearchQuery;
      respond(ctx, 200, await search.searchEvents(principalOf(operation), searchInputOf(query), query.limit ?? 20, query.cursor));
    },
    async countSearchEvents(operation, ctx) {
      const query = operation.request.query as CountQuery;
      respond(ctx, 200, await search.countEvents(principalOf(operation), searchInputOf(query)));
    },
  };
}
