-- Stores one outbound webhook message for an owner's cause when one of the owner's enabled endpoints
-- wants it (the delivery worker fans it out to the endpoints, docs/outbound-webhooks.md); returns how
-- many messages (0 or 1). Called by webhook_checkout_completed and src/spend/spend-ledger.ts.
create or replace function webhook_enqueue(p_owner uuid, p_conversation uuid, p_type text, p_data jsonb)
returns integer language plpgsql as $$
begin
  if not exists (
    select 1 from webhook_endpoints e
    where e.owner_id = p_owner and not e.disabled
      and (e.event_types is null or p_type = any (e.event_types))
      and (e.conversation_id is null or e.conversation_id = p_conversation)
      and (e.conversation_ids is null or p_conversation = any (e.conversation_ids))
  ) then
    return 0;
  end if;
  insert into webhook_messages (id, owner_id, conversation_id, type, data)
  values ('msg_' || replace(gen_random_uuid()::text, '-', ''), p_owner, p_conversation, p_type, p_data);
  return 1;
end
$$;
