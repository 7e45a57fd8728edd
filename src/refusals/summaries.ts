import type { EntityManager } from '@mikro-orm/postgresql';
import { sqlRows } from '../db/sql.ts';
import { iso, type DeliveryRefusalsView } from './mapper.ts';

/** The refusals kept for each of `conversationIds` (canonical) that `ownerId` owns: what their views show. */
export async function deliveryRefusalSummaries(em: EntityManager, ownerId: string, conversationIds: string[]): Promise<Map<string, DeliveryRefusalsView>> {
  const summaries = new Map<string, DeliveryRefusalsView>();
  if (conversationIds.length === 0) return summaries;
  const rows = await sqlRows<{ conversation_key: string; count: string; last_seen_at: Date | string; status: number; detail: string }>(
    em,
    `select distinct on (conversation_key) conversation_key, count(*) over (partition by conversation_key) as count,
            last_seen_at, status, detail
     from refused_deliveries where owner_id = $1 and conversation_key = any($2::uuid[])
     order by conversation_key, last_seen_at desc, id desc`,
    [ownerId, conversationIds],
  );
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
