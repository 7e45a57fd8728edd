-- `conversation.events` are owed, not stored as messages: the row the ingest updates anyway marks from
-- which sequence number its events are owed (`webhook_events_from`), and the delivery worker makes the
-- messages from the stored events (docs/outbound-webhooks.md, "How it works"). While a mark stands it is
-- kept, without a look at the endpoints.
create or replace function webhook_events_owed() returns trigger language plpgsql as $$
begin
  if new.webhook_events_from is null and exists (
    select 1 from webhook_endpoints e
    where e.owner_id = new.owner_id and not e.disabled
      and (e.event_types is null or 'conversation.events' = any (e.event_types))
      and (e.conversation_id is null or e.conversation_id = new.id)
      and (e.conversation_ids is null or new.id = any (e.conversation_ids))
  ) then
    new.webhook_events_from := old.event_count + 1;
  end if;
  return new;
end
$$;
create or replace trigger webhook_conversation_events before update of event_count on conversations
  for each row when (new.event_count > old.event_count) execute function webhook_events_owed();
