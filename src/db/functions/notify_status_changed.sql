-- Announces a conversation's new execution status on `conversation_activity` ({"type":"status",
-- conversation_id, execution_status, last_seq}), after the events stored with it (docs/live-streams.md).
create or replace function notify_status_changed() returns trigger language plpgsql as $$
begin
  perform pg_notify('conversation_activity', json_build_object(
    'type', 'status', 'conversation_id', new.id, 'execution_status', new.execution_status,
    'last_seq', new.event_count)::text);
  return null;
end
$$;
create or replace trigger conversations_notify_status after update of execution_status on conversations
  for each row when (old.execution_status is distinct from new.execution_status)
  execute function notify_status_changed();
