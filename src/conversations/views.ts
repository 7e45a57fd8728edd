import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../../generated/openapi.ts';
import { sqlRows } from '../db/sql.ts';
import { CONVERSATION_VIEW_COLUMNS, CONVERSATION_VIEW_FROM, toConversationView, type ConversationViewRow } from './mapper.ts';

type ConversationView = components['schemas']['Conversation'];

/** The ids of `ownerId`'s conversations naming each of `ids` as their parent, oldest first. */
export async function subConversationIds(em: EntityManager, ownerId: string, ids: string[]): Promise<Map<string, string[]>> {
  const byParent = new Map<string, string[]>();
  if (ids.length === 0) return byParent;
  const rows = await sqlRows<{ parent: string; ids: string[] }>(
    em,
    `select parent_conversation_id as parent, array_agg(id order by created_at, id) as ids from conversations
     where parent_conversation_id = any($1::uuid[]) and owner_id = $2 group by parent_conversation_id`,
    [ids, ownerId],
  );
  for (const row of rows) byParent.set(row.parent, row.ids);
  return byParent;
}

/** Views of rows already read (`CONVERSATION_VIEW_COLUMNS`), in their order. */
export async function viewsOf(em: EntityManager, ownerId: string, rows: ConversationViewRow[]): Promise<ConversationView[]> {
  const subs = await subConversationIds(em, ownerId, rows.map((row) => row.id));
  return rows.map((row) => toConversationView(row, subs.get(row.id) ?? []));
}

/** One conversation's view, whoever owns it (the caller checks), or undefined when there is none. */
export async function readConversationView(em: EntityManager, id: string): Promise<{ ownerId: string; view: ConversationView } | undefined> {
  const [row] = await sqlRows<ConversationViewRow>(em, `select ${CONVERSATION_VIEW_COLUMNS} from ${CONVERSATION_VIEW_FROM} where c.id = $1`, [id]);
  if (!row) return undefined;
  const [view] = await viewsOf(em, row.owner_id, [row]);
  return { ownerId: row.owner_id, view: view! };
}
