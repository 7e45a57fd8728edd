import type { EntityManager } from '@mikro-orm/postgresql';
import { iso, type DeliveryRefusalsView } from './mapper.ts';
import { deliveryRefusalRows } from './queries.ts';

/** The refusals kept for each of `conversationIds` (canonical) that `ownerId` owns: what their views show. */
export async function deliveryRefusalSummaries(em: EntityManager, ownerId: string, conversationIds: string[]): Promise<Map<string, DeliveryRefusalsView>> {
  const summaries = new Map<string, DeliveryRefusalsView>();
  if (conversationIds.length === 0) return summaries;
  const rows = await deliveryRefusalRows(em, ownerId, conversationIds);
  for (const row of rows) {
    summaries.set(row.conversation_key, {
      count: Number(row.count),
      last_at: iso(row.last_seen_at),
      last_status: row.status as DeliveryRefusalsView['last_status'],
      last_detail: row.detail,
    });
  }
  return summaries;
}
