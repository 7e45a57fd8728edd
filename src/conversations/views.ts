import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../../generated/openapi.ts';
import { toConversationView, type ConversationViewRow } from './mapper.ts';
import { conversationViewRow, subConversationRows } from './queries.ts';

type ConversationView = components['schemas']['Conversation'];

/** Views of rows already read (`CONVERSATION_VIEW_COLUMNS`), in their order. */
export async function viewsOf(em: EntityManager, ownerId: string, rows: ConversationViewRow[]): Promise<ConversationView[]> {
  const subs = new Map<string, string[]>();
  if (rows.length > 0) {
    for (const row of await subConversationRows(em, ownerId, rows.map((row) => row.id))) subs.set(row.parent, row.ids);
  }
  return rows.map((row) => toConversationView(row, subs.get(row.id) ?? []));
}

/** One conversation's view, whoever owns it (the caller checks), or undefined when there is none. */
export async function readConversationView(em: EntityManager, id: string): Promise<{ ownerId: string; view: ConversationView } | undefined> {
  const row = await conversationViewRow(em, id);
  if (!row) return undefined;
  const [view] = await viewsOf(em, row.owner_id, [row]);
  return { ownerId: row.owner_id, view: view! };
}
