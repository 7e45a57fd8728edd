import type { Knex } from '@mikro-orm/postgresql';
import type { OutboundQueue } from './outbound-queue.ts';

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
export async function makeOwedEventMessages(knex: Knex, maxEvents = OWED_EVENTS): Promise<{ read: number; moved: number }> {
  const owed = (
    await knex.raw(
      `with owed as (
         select c.id, c.owner_id, c.created_at, c.event_count, c.webhook_events_from as from_seq,
           least(c.event_count, c.webhook_events_from + ? - 1) as to_seq
         from conversations c where c.webhook_events_from is not null limit ?
       ),
       events as (
         select o.id as conversation_id, o.owner_id, o.created_at as conversation_created_at, e.seq, e.received_at,
           case when e.xmin = lag(e.xmin) over (partition by o.id order by e.seq) then 0 else 1 end as starts
         from owed o join conversation_events e on e.conversation_id = o.id and e.seq between o.from_seq and o.to_seq
       ),
       runs as (
         select *, sum(starts) over (partition by conversation_id order by seq) as run from events
       ),
       batches as (
         select r.conversation_id, r.owner_id, r.conversation_created_at, r.run, max(r.run) over (partition by r.conversation_id) as last_run,
           min(r.seq) as from_seq, max(r.seq) as to_seq, min(r.received_at) as created_at
         from runs r group by r.conversation_id, r.owner_id, r.conversation_created_at, r.run
       ),
       kept as (
         -- The last transaction of a range cut at the cap may go on past it: made whole next time.
         select b.* from batches b join owed o on o.id = b.conversation_id
         where not (o.to_seq < o.event_count and b.run = b.last_run and b.last_run > 1)
       ),
       made as (
         insert into webhook_messages (id, owner_id, conversation_id, type, data, created_at)
         -- The conversation's creation time too: a conversation deleted and sent again starts at seq 1 again.
         select 'msg_' || md5(k.conversation_id::text || '/' || (extract(epoch from k.conversation_created_at) * 1000000)::bigint || '/' || k.from_seq),
           k.owner_id, k.conversation_id, 'conversation.events',
           jsonb_build_object('conversation_id', k.conversation_id, 'from_seq', k.from_seq, 'to_seq', k.to_seq), k.created_at
         from kept k
         on conflict (id) do nothing
       )
       select o.id, o.from_seq, coalesce(max(k.to_seq), o.to_seq) as to_seq
       from owed o left join kept k on k.conversation_id = o.id group by o.id, o.from_seq, o.to_seq`,
      [maxEvents, OWED_BATCH],
    )
  ).rows as { id: string; from_seq: number; to_seq: number }[];
  if (owed.length === 0) return { read: 0, moved: 0 };
  const moved = await knex.raw(
    `with made as (select * from unnest(?::uuid[], ?::integer[], ?::integer[]) as m(id, from_seq, to_seq)),
     locked as (
       select c.id, m.to_seq from conversations c join made m on m.id = c.id and c.webhook_events_from = m.from_seq
       order by c.id for update of c skip locked
     )
     update conversations c set webhook_events_from = case when c.event_count > l.to_seq then l.to_seq + 1 end
     from locked l where c.id = l.id`,
    [owed.map((o) => o.id), owed.map((o) => o.from_seq), owed.map((o) => o.to_seq)],
  );
  return { read: owed.length, moved: (moved as { rowCount: number }).rowCount };
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
    const ids = (
      (await trx.raw('select id from webhook_messages where not fanned_out order by created_at limit ? for update skip locked', [FANOUT_BATCH])).rows as {
        id: string;
      }[]
    ).map((r) => r.id);
    if (ids.length === 0) return 0;
    const wanted = (
      await trx.raw(
        `with deliveries as (
           insert into webhook_deliveries (message_id, endpoint_id, next_attempt_at, created_at)
           select m.id, e.id, now(), m.created_at
           from webhook_messages m join webhook_endpoints e on e.owner_id = m.owner_id
           where m.id = any (?::text[]) and not e.disabled and e.created_at <= m.created_at
             and (e.event_types is null or m.type = any (e.event_types))
             and (e.conversation_id is null or e.conversation_id = m.conversation_id)
           on conflict do nothing
           returning message_id
         ), fanned_out as (
           update webhook_messages set fanned_out = true where id = any (?::text[])
         )
         select distinct message_id from deliveries`,
        [ids, ids],
      )
    ).rows as { message_id: string }[];
    await queue.enqueueDeliveries(trx, wanted.map((m) => ({ message_id: m.message_id, attempt: 1 })));
    return ids.length;
  });
}
