import { sqlRows, sqlRun, type SqlRunner } from '../db/sql.ts';

/** The share links' SQL (docs/sharing.md). */

/** A stored link as its owner sees it. */
export interface ShareLinkRow {
  id: string;
  token_hint: string;
  share_tags: boolean;
  created_at: Date;
  expires_at: Date | null;
  revoked_at: Date | null;
}

const LINK_COLUMNS = 'id, token_hint, share_tags, created_at, expires_at, revoked_at';

/** Locks the conversation for the rest of the transaction and returns its owner, or undefined when there is none. */
export async function lockConversationOwner(trx: SqlRunner, conversationId: string): Promise<string | undefined> {
  const [row] = await sqlRows<{ owner_id: string }>(trx, 'select owner_id from conversations where id = $1 for update', [conversationId]);
  return row?.owner_id;
}

/** The conversation's owner, or undefined when there is none. */
export async function conversationOwnerId(on: SqlRunner, conversationId: string): Promise<string | undefined> {
  const [row] = await sqlRows<{ owner_id: string }>(on, 'select owner_id from conversations where id = $1', [conversationId]);
  return row?.owner_id;
}

/** Links of the conversation that still work. */
export async function activeLinkCount(on: SqlRunner, conversationId: string): Promise<number> {
  const [row] = await sqlRows<{ count: number }>(
    on,
    `select count(*)::integer as count from share_links
     where conversation_id = $1 and revoked_at is null and (expires_at is null or expires_at > now())`,
    [conversationId],
  );
  return row!.count;
}

export async function insertShareLink(
  on: SqlRunner,
  link: { id: string; conversationId: string; tokenHash: string; tokenHint: string; createdBy: string; shareTags: boolean; expiresAt: Date | null },
): Promise<ShareLinkRow> {
  const [row] = await sqlRows<ShareLinkRow>(
    on,
    `insert into share_links (id, conversation_id, token_hash, token_hint, created_by, share_tags, expires_at)
     values ($1, $2, $3, $4, $5, $6, $7) returning ${LINK_COLUMNS}`,
    [link.id, link.conversationId, link.tokenHash, link.tokenHint, link.createdBy, link.shareTags, link.expiresAt],
  );
  return row!;
}

/** The conversation's links, working ones first, newest first within each, at most `limit`. */
export function shareLinks(on: SqlRunner, conversationId: string, limit: number): Promise<ShareLinkRow[]> {
  return sqlRows<ShareLinkRow>(
    on,
    `select ${LINK_COLUMNS} from share_links where conversation_id = $1
     order by (revoked_at is null and (expires_at is null or expires_at > now())) desc, created_at desc, id desc
     limit $2`,
    [conversationId, limit],
  );
}

/** Revokes a link of the conversation unless it already is; the link as it now is, or undefined when the conversation has no such link. */
export async function revokeShareLink(on: SqlRunner, conversationId: string, linkId: string): Promise<{ link: ShareLinkRow; revoked: boolean } | undefined> {
  const revoked = await sqlRun(
    on,
    'update share_links set revoked_at = date_trunc(\'milliseconds\', now()) where id = $1 and conversation_id = $2 and revoked_at is null',
    [linkId, conversationId],
  );
  const [link] = await sqlRows<ShareLinkRow>(on, `select ${LINK_COLUMNS} from share_links where id = $1 and conversation_id = $2`, [linkId, conversationId]);
  return link ? { link, revoked: revoked > 0 } : undefined;
}

/** The link a token opens, if it still works: one probe of the unique index on the hash. */
export async function workingLinkByTokenHash(
  on: SqlRunner,
  tokenHash: string,
): Promise<{ conversation_id: string; share_tags: boolean; expires_at: Date | null } | undefined> {
  const [row] = await sqlRows<{ conversation_id: string; share_tags: boolean; expires_at: Date | null }>(
    on,
    `select conversation_id, share_tags, expires_at from share_links
     where token_hash = $1 and revoked_at is null and (expires_at is null or expires_at > now())`,
    [tokenHash],
  );
  return row;
}
