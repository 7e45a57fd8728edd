-- The conversation messages written in the transaction of their cause: `conversation.created` on insert,
-- `conversation.status_changed` and, on finished/error/stuck, `conversation.finished` on a status change
-- (`conversation.events`: webhook_events_owed.sql). The owner's enabled endpoints are read once per
-- conversation and change ('*': every type); the wanted messages are inserted here, not through
-- webhook_enqueue, to spare a probe per message type.
create or replace function webhook_conversation_changed() returns trigger language plpgsql as $$
declare
  wants text[];
  last_message json;
  last_text text;
  title text;
begin
  select array_agg(t.type) into wants
  from webhook_endpoints e, unnest(coalesce(e.event_types, '{*}'::text[])) as t(type)
  where e.owner_id = new.owner_id and not e.disabled and (e.conversation_id is null or e.conversation_id = new.id)
    and (e.conversation_ids is null or new.id = any (e.conversation_ids));
  if wants is null then
    return null;
  end if;
  if tg_op = 'INSERT' then
    if '*' = any (wants) or 'conversation.created' = any (wants) then
      insert into webhook_messages (id, owner_id, conversation_id, type, data)
      values ('msg_' || replace(gen_random_uuid()::text, '-', ''), new.owner_id, new.id, 'conversation.created',
        jsonb_build_object('conversation_id', new.id, 'created_at', new.created_at));
    end if;
    return null;
  end if;
  if new.execution_status is distinct from old.execution_status then
    if '*' = any (wants) or 'conversation.status_changed' = any (wants) then
      insert into webhook_messages (id, owner_id, conversation_id, type, data)
      values ('msg_' || replace(gen_random_uuid()::text, '-', ''), new.owner_id, new.id, 'conversation.status_changed',
        jsonb_build_object('conversation_id', new.id, 'from', old.execution_status, 'to', new.execution_status));
    end if;
    if new.execution_status in ('finished', 'error', 'stuck') and ('*' = any (wants) or 'conversation.finished' = any (wants)) then
      select e.payload into last_message from conversation_events e
      where e.conversation_id = new.id and e.kind = 'MessageEvent' and e.payload->>'source' = 'agent'
      order by e.seq desc limit 1;
      if last_message is not null then
        select string_agg(c.value->>'text', E'\n' order by c.ordinality) into last_text
        from json_array_elements(coalesce(last_message->'llm_message'->'content', '[]'::json)) with ordinality c
        where c.value->>'type' = 'text';
      end if;
      select i.title #>> '{}' into title from conversation_infos i where i.conversation_id = new.id;
      insert into webhook_messages (id, owner_id, conversation_id, type, data)
      values ('msg_' || replace(gen_random_uuid()::text, '-', ''), new.owner_id, new.id, 'conversation.finished',
        jsonb_build_object('conversation_id', new.id, 'execution_status', new.execution_status, 'title', title,
          'event_count', new.event_count, 'last_agent_message', last_text));
    end if;
  end if;
  return null;
end
$$;
create or replace trigger webhook_conversation_created after insert on conversations
  for each row execute function webhook_conversation_changed();
create or replace trigger webhook_conversation_updated after update of execution_status on conversations
  for each row when (new.execution_status is distinct from old.execution_status) execute function webhook_conversation_changed();
