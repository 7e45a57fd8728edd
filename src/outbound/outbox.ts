import type { Knex } from '@mikro-orm/postgresql';
import type { SqlRunner } from '../db/sql.ts';
import type { OutboundQueue } from './outbound-queue.ts';
import { fanOutMessages, insertOwedEventMessages, lockUnfannedMessages, moveOwedMarks } from './queries.ts';

/** Messages fanned out per transaction. */
export const FANOUT_BATCH = 100;
/** Conversations whose owed `conversation.events` messages are made per statement. */
export const OWED_BATCH = 100;
/** Events of one conversation read per statement: a backlog is made in steps (docs/outbound-webhooks.md). */
export const OWED_EVENTS = 10_000;

/**
 * Makes the `conversation.events` messages owed by up to `OWED_BATCH` conversations (their
 * `webhook_events_from` mark), `maxEvents` events of each at most, then moves the marks past what was
 * made, skipping rows an ingest holds (docs/outbound-webhooks.md, "How it works"). Returns how many
 * conversations it read, and how many marks it moved.
 */
export async function makeOwedEventMessages(on: SqlRunner, maxEvents = OWED_EVENTS): Promise<{ read: number; moved: number }> {
  const owed = await insertOwedEventMessages(on, maxEvents, OWED_BATCH);
  if (owed.length === 0) return { read: 0, moved: 0 };
  const moved = await moveOwedMarks(on, owed);
  return { read: owed.length, moved };
}

/**
 * Fans out up to `FANOUT_BATCH` messages not fanned out yet, in one transaction: one delivery per
 * endpoint that wants each (enabled, created no later than the message, its types and conversation
 * matching), the messages marked `fanned_out`, and one queued job per message that has deliveries, for
 * the first attempt to all of them. `SKIP LOCKED` lets instances share the work. Returns how many
 * messages it fanned out.
 */
export async function fanOutBatch(knex: Knex, queue: OutboundQueue): Promise<number> {
  return knex.transaction(async (trx) => {
    const ids = await lockUnfannedMessages(trx, FANOUT_BATCH);
    if (ids.length === 0) return 0;
    const wanted = await fanOutMessages(trx, ids);
    await queue.enqueueDeliveries(trx, wanted.map((messageId) => ({ message_id: messageId, attempt: 1 })));
    return ids.length;
  });
}
