import { Migration } from '@mikro-orm/migrations';
import { INGEST_EVENTS_SQL } from './Migration20261122015000_lossless_payloads.ts';

/** This version of `ingest_events`; Migration20261123070000_set_based_ingest's `down` restores it. */
export const INGEST_EVENTS_SQL_WITH_DELTAS = `
create function ingest_events(
  conversation uuid, owner uuid, event_ids text[], kinds text[], statuses text[], payloads text[],
  deltas text[])
returns table (owner_id uuid, stored integer)
language plpgsql as $$
declare
  current_owner uuid;
  last_seq integer;
  appended integer;
  delta text;
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

  foreach delta in array deltas loop
    perform pg_notify('conversation_activity', delta);
  end loop;

  with incoming as (
    select * from unnest(event_ids, kinds, statuses, payloads) with ordinality
      as e(event_id, kind, status, payload, ord)
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
    select conversation, last_seq + row_number() over (order by ord), event_id, kind, payload::json from fresh
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
`;

/**
 * Live conversation activity on PostgreSQL's own LISTEN/NOTIFY, so every server instance can tell
 * its subscribers what any instance stored. One channel, `conversation_activity`; each payload is a
 * small JSON object with a `type`:
 *
 * - `{"type":"events","conversation_id":…,"first_seq":…,"last_seq":…}`: events with these sequence
 *   numbers were committed (from a statement-level trigger, so every path that stores events
 *   announces them). Listeners read the events themselves by sequence number: an event can be far
 *   larger than a notification may be (8000 bytes).
 * - `{"type":"status","conversation_id":…,"execution_status":…,"last_seq":…}`: the conversation's
 *   execution status changed.
 * - `{"type":"delta","conversation_id":…,"batch":…,"n":…,"event":{…}}`: a StreamingDeltaEvent,
 *   which is never stored; built by the application (see `ConversationService.ingest`), which drops
 *   any that would not fit. `batch` and `n` keep identical deltas of one transaction apart:
 *   PostgreSQL delivers identical payloads of one transaction only once.
 *
 * Notifications are sent when the transaction commits, in the order they were made: deltas (made
 * right after the ownership check) come before the events stored with them.
 *
 * `ingest_events` gains `deltas text[]`, the delta payloads to publish, notified after the ownership
 * check so that nobody can publish into another user's conversation.
 */
export class Migration20261122016000_live_notifications extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create function notify_events_stored() returns trigger language plpgsql as $$
      begin
        perform pg_notify('conversation_activity', json_build_object(
          'type', 'events', 'conversation_id', conversation_id, 'first_seq', min(seq), 'last_seq', max(seq))::text)
        from stored group by conversation_id;
        return null;
      end
      $$;
      create trigger conversation_events_notify after insert on conversation_events
        referencing new table as stored
        for each statement execute function notify_events_stored();

      create function notify_status_changed() returns trigger language plpgsql as $$
      begin
        perform pg_notify('conversation_activity', json_build_object(
          'type', 'status', 'conversation_id', new.id, 'execution_status', new.execution_status,
          'last_seq', new.event_count)::text);
        return null;
      end
      $$;
      create trigger conversations_notify_status after update of execution_status on conversations
        for each row when (old.execution_status is distinct from new.execution_status)
        execute function notify_status_changed();

      drop function ingest_events(uuid, uuid, text[], text[], text[], text[]);

      ${INGEST_EVENTS_SQL_WITH_DELTAS}
    `);
  }

  override async down(): Promise<void> {
    this.addSql(`
      drop function if exists ingest_events(uuid, uuid, text[], text[], text[], text[], text[]);
      drop trigger if exists conversations_notify_status on conversations;
      drop function if exists notify_status_changed();
      drop trigger if exists conversation_events_notify on conversation_events;
      drop function if exists notify_events_stored();
    `);
    this.addSql(INGEST_EVENTS_SQL);
  }
}
