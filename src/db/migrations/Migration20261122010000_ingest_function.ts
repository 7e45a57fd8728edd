import { Migration } from '@mikro-orm/migrations';

/**
 * `ingest_events`: the webhook's whole write in one round trip and one transaction.
 *
 * 1. Creates the conversation on first delivery, and locks its row. Concurrent batches of one
 *    conversation queue on that lock, so sequence numbers stay dense and in commit order.
 * 2. If the conversation belongs to someone else, changes nothing and reports the owner.
 * 3. Appends the events whose ids are not stored yet (first write wins), numbered after the last.
 *    This statement runs after the lock is held, and PL/pgSQL gives it a fresh snapshot, so it sees
 *    everything a batch that held the lock before us committed.
 * 4. Brings the conversation's counters and execution status up to date.
 *
 * `events` is a JSON array of {event_id, kind, payload, status, ord}.
 */
export class Migration20261122010000_ingest_function extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create function ingest_events(conversation uuid, owner uuid, events jsonb)
      returns table (owner_id uuid, stored integer)
      language plpgsql as $$
      declare
        current_owner uuid;
        last_seq integer;
        appended integer;
      begin
        insert into conversations (id, owner_id, created_at, updated_at)
        values (conversation, owner, date_trunc('milliseconds', now()), now())
        on conflict (id) do nothing;
        -- A row lock, not a no-op update: no dead row version per delivery.
        select c.owner_id, c.event_count into current_owner, last_seq
        from conversations c where c.id = conversation
        for update;

        if current_owner <> owner then
          return query select current_owner, 0;
          return;
        end if;

        with incoming as (
          select * from jsonb_to_recordset(events)
            as e(event_id text, kind text, payload jsonb, status text, ord int)
        ),
        fresh as (
          select incoming.* from incoming
          where not exists (
            select 1 from conversation_events stored
            where stored.conversation_id = conversation and stored.event_id = incoming.event_id
          )
        ),
        inserted as (
          insert into conversation_events (conversation_id, seq, event_id, kind, payload)
          select conversation, last_seq + row_number() over (order by ord), event_id, kind, payload from fresh
          returning 1
        )
        update conversations c set
          event_count = c.event_count + (select count(*) from inserted),
          execution_status = coalesce(
            (select status from fresh where status is not null order by ord desc limit 1),
            c.execution_status),
          last_event_at = case when exists (select 1 from inserted) then now() else c.last_event_at end,
          updated_at = now()
        where c.id = conversation
        returning c.event_count - last_seq into appended;

        return query select current_owner, appended;
      end
      $$;
    `);
  }

  override async down(): Promise<void> {
    this.addSql('drop function if exists ingest_events(uuid, uuid, jsonb);');
  }
}
