import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../../generated/openapi.ts';
import { deliveryRefusalSummaries } from '../refusals/summaries.ts';
import { toConversationView, type ConversationViewRow } from './mapper.ts';
import { conversationViewRow, subConversationRows } from './queries.ts';

type ConversationView = components['schemas']['Conversation'];

/** Views of rows already read (`CONVERSATION_VIEW_COLUMNS`), in their order. */
export async function viewsOf(em: EntityManager, ownerId: string, rows: ConversationViewRow[]): Promise<ConversationView[]> {
  const ids = rows.map((row) => row.id);
  const subs = new Map<string, string[]>();
  const [subRows, refusals] = await Promise.all([ids.length > 0 ? subConversationRows(em, ownerId, ids) : [], deliveryRefusalSummaries(em, ownerId, ids)]);
  for (const row of subRows) subs.set(row.parent, row.ids);
  return rows.map((row) => toConversationView(row, subs.get(row.id) ?? [], refusals.get(row.id) ?? null));
}

/** One conversation's view, whoever owns it (the caller checks), or undefined when there is none. */
export async function readConversationView(em: EntityManager, id: string): Promise<{ ownerId: string; view: ConversationView } | undefined> {
  const row = await conversationViewRow(em, id);
  if (!row) return undefined;
  const [view] = await viewsOf(em, row.owner_id, [row]);
  return { ownerId: row.owner_id, view: view! };
}
