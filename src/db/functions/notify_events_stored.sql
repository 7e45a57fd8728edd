-- Announces committed events on `conversation_activity` ({"type":"events", conversation_id, first_seq,
-- last_seq}) from a statement-level trigger, so every path that stores events announces them; listeners
-- read the events by sequence number, as an event can exceed a notification's 8000 bytes
-- (docs/live-streams.md).
create or replace function notify_events_stored() returns trigger language plpgsql as $$
begin
  perform pg_notify('conversation_activity', json_build_object(
    'type', 'events', 'conversation_id', conversation_id, 'first_seq', min(seq), 'last_seq', max(seq))::text)
  from stored group by conversation_id;
  return null;
end
$$;
create or replace trigger conversation_events_notify after insert on conversation_events
  referencing new table as stored
  for each statement execute function notify_events_stored();
