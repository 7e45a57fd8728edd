import type { EntityManager, Knex } from '@mikro-orm/postgresql';
import { keyLookupsOnly } from '../db/sql.ts';
import type { OutboundQueue } from './outbound-queue.ts';
import { MAX_EVENTS_BODY_BYTES } from './message-body.ts';
import {
  deleteMessages,
  fanOutMessages,
  insertEventMessages,
  lockUnfannedMessages,
  lockUnmovedMarks,
  moveOwedMarks,
  owedConversations,
  owedTransactionRuns,
  type EventsMessage,
  type OwedConversation,
  type TransactionRun,
} from './queries.ts';

/** Messages fanned out per transaction. */
export const FANOUT_BATCH = 100;
/** Conversations whose owed `conversation.events` messages are made per transaction. */
export const OWED_BATCH = 100;
/** Events of one conversation read per transaction: a backlog is made in steps (docs/outbound-webhooks.md). */
export const OWED_EVENTS = 5_000;
/** Events of one message at most, unless one transaction alone stored more. */
export const MESSAGE_MAX_EVENTS = 1_000;

/**
 * Makes the `conversation.events` messages owed by up to `OWED_BATCH` conversations (their
 * `webhook_events_from` mark), `maxEvents` events of each at most, and moves the marks past them
 * (docs/outbound-webhooks.md, "How it works"). The events are read first, without a lock; then, in one
 * short transaction, the rows whose mark has not moved are locked (`SKIP LOCKED`: never waiting for an
 * ingest, which waits for this only while the messages are stored), their messages stored and their
 * marks moved. Returns how many conversations it made messages for.
 */
export async function makeOwedEventMessages(em: EntityManager, maxEvents = OWED_EVENTS): Promise<number> {
  const owed = await owedConversations(em, OWED_BATCH);
  if (owed.length === 0) return 0;
  const { messages, marks } = coalesceOwedRuns(owed, await owedTransactionRuns(em, owed, maxEvents), maxEvents);
  return em.getConnection().getKnex().transaction(async (trx) => {
    await keyLookupsOnly(trx);
    const locked = new Set(await lockUnmovedMarks(trx, owed));
    if (locked.size === 0) return 0;
    const mine = messages.filter((m) => locked.has(m.conversationId));
    const myMarks = marks.filter((m) => locked.has(m.id));
    const unwanted = settleConflicts(mine, await insertEventMessages(trx, mine), myMarks);
    if (unwanted.length > 0) await deleteMessages(trx, unwanted);
    await moveOwedMarks(trx, myMarks);
    return locked.size;
  });
}

/**
 * The messages for the runs read: consecutive transactions of a conversation go into one message while
 * it stays within `MESSAGE_MAX_EVENTS` events and `MAX_EVENTS_BODY_BYTES` of events (its body then
 * carries the events themselves); a transaction over either alone is a message of its own. When the
 * read stopped at `maxEvents` before the conversation's last event, its last transaction may go on past
 * it and waits for the next step, unless it is the only one read (then it is cut). Returns the messages
 * and each conversation's next mark (the first event not in a message).
 */
export function coalesceOwedRuns(
  owed: readonly OwedConversation[],
  runs: readonly TransactionRun[],
  maxEvents: number,
): { messages: EventsMessage[]; marks: { id: string; next: number }[] } {
  const byConversation = new Map<string, TransactionRun[]>();
  for (const run of runs) {
    let list = byConversation.get(run.conversation_id);
    if (!list) byConversation.set(run.conversation_id, (list = []));
    list.push(run);
  }
  const messages: EventsMessage[] = [];
  const marks: { id: string; next: number }[] = [];
  for (const conversation of owed) {
    const read = byConversation.get(conversation.id) ?? [];
    const cut = conversation.from_seq + maxEvents - 1 < conversation.event_count;
    const whole = cut && read.length > 1 ? read.slice(0, -1) : read;
    let current: EventsMessage | undefined;
    let events = 0;
    let bytes = 0;
    for (const run of whole) {
      const runEvents = run.to_seq - run.from_seq + 1;
      if (current && events + runEvents <= MESSAGE_MAX_EVENTS && bytes + run.bytes <= MAX_EVENTS_BODY_BYTES) {
        current.toSeq = run.to_seq;
        events += runEvents;
        bytes += run.bytes;
        continue;
      }
      current = {
        conversationId: conversation.id,
        ownerId: conversation.owner_id,
        createdMicros: conversation.created_micros,
        fromSeq: run.from_seq,
        toSeq: run.to_seq,
        createdAt: run.received_at,
      };
      messages.push(current);
      events = runEvents;
      bytes = run.bytes;
    }
    marks.push({ id: conversation.id, next: whole.length > 0 ? whole[whole.length - 1]!.to_seq + 1 : conversation.from_seq });
  }
  return { messages, marks };
}

/**
 * Where a message's id was already stored (a mark that went back, or an instance of an earlier version
 * making the same range), the stored one stands: the conversation's mark moves to its end instead, and
 * the messages made after it in this transaction are returned, to be removed and made again from there.
 */
export function settleConflicts(
  messages: readonly EventsMessage[],
  stored: readonly { id: string; stored_to_seq: number | null }[],
  marks: { id: string; next: number }[],
): string[] {
  const unwanted: string[] = [];
  const settled = new Set<string>();
  for (const [i, message] of messages.entries()) {
    const { id, stored_to_seq: storedTo } = stored[i]!;
    if (settled.has(message.conversationId)) unwanted.push(id);
    else if (storedTo !== message.toSeq) {
      settled.add(message.conversationId);
      // Unknown (stored by a transaction this one cannot see yet): made again from here next time.
      marks.find((m) => m.id === message.conversationId)!.next = storedTo === null ? message.fromSeq : storedTo + 1;
    }
  }
  return unwanted;
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
