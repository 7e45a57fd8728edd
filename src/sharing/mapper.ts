import type { components } from '../../generated/openapi.ts';
import type { ShareLinkRow } from './queries.ts';

type ConversationView = components['schemas']['Conversation'];
type ShareLink = components['schemas']['ShareLink'];
type SharedConversation = components['schemas']['SharedConversation'];

const isoOrNull = (value: Date | null): string | null => (value === null ? null : new Date(value).toISOString());

/** A link as its owner sees it; `url` only when just created (the token is not stored). */
export function toShareLinkView(row: ShareLinkRow, url: string | null = null): ShareLink {
  return {
    id: row.id,
    url,
    token_hint: row.token_hint,
    share_tags: row.share_tags,
    created_at: new Date(row.created_at).toISOString(),
    expires_at: isoOrNull(row.expires_at),
    revoked_at: isoOrNull(row.revoked_at),
  };
}

/** The owner's view cut down to what a link shows: no ids, no relations, tags only when shared. */
export function toSharedConversation(
  view: ConversationView,
  link: { share_tags: boolean; expires_at: Date | null },
): SharedConversation {
  return {
    title: view.title,
    execution_status: view.execution_status,
    event_count: view.event_count,
    created_at: view.created_at,
    updated_at: view.updated_at,
    last_event_at: view.last_event_at,
    metrics: view.metrics,
    accumulated_cost_usd: view.accumulated_cost_usd,
    accumulated_cost_micro_usd: view.accumulated_cost_micro_usd,
    tags: link.share_tags ? view.tags : null,
    expires_at: isoOrNull(link.expires_at),
  };
}
