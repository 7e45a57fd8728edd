import type { EntityManager } from '@mikro-orm/postgresql';

/**
 * Outbound work not done yet: deliveries due, plus messages not fanned out yet (their deliveries do
 * not exist yet), plus conversations whose newest events are owed a message not made yet.
 */
export async function outboundQueueDepth(em: EntityManager): Promise<number> {
  const rows = await em.getConnection().execute<{ pending: number }[]>(
    `select (select count(*) from webhook_deliveries where state = 'pending')::integer
          + (select count(*) from webhook_messages where not fanned_out)::integer
          + (select count(*) from conversations where webhook_events_from is not null)::integer as pending`,
  );
  return rows[0]!.pending;
}
