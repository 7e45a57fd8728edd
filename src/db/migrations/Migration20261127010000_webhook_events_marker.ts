import { Migration } from '@mikro-orm/migrations';

/**
 * `conversation.events` messages are no longer a row the ingest transaction inserts: the conversation
 * row it updates anyway says from which sequence number its events are still owed to the endpoints
 * (`webhook_events_from`), and the delivery worker makes the messages from the stored events
 * (docs/outbound-webhooks.md, "How it works"). The message row, with its key and the outbox index, was
 * what 10 endpoints still cost a one-event batch (about 13 % of its database time); setting a column of
 * a row already being updated costs next to nothing, and once it is set the ingest does not even look
 * for endpoints again until the worker has caught up.
 *
 * Still durable in the same transaction as the events: a committed batch leaves the mark, a rolled-back
 * one neither events nor mark. The worker splits what is owed by transaction (the events' `xmin`), so
 * one committed webhook transaction is still one message, with an id derived from the conversation and
 * its first sequence number: made twice (two instances, or a crash before the mark moved on), it is
 * stored once.
 *
 * The other conversation messages (`created`, `status_changed`, `finished`) stay rows written by the
 * trigger, which now fires on a status change only.
 */
export class Migration20261127010000_webhook_events_marker extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      alter table conversations add column webhook_events_from integer;
      -- What the worker polls: only conversations with events owed (a small index, rows leave it).
      create index conversations_webhook_events_idx on conversations (id) where webhook_events_from is not null;

      -- Marks the first new event owed when an endpoint of the owner wants this conversation's events.
      -- While a mark stands it is kept as it is, without a look at the endpoints.
      create function webhook_events_owed() returns trigger language plpgsql as $$
      begin
        if new.webhook_events_from is null and exists (
          select 1 from webhook_endpoints e
          where e.owner_id = new.owner_id and not e.disabled
            and (e.event_types is null or 'conversation.events' = any (e.event_types))
            and (e.conversation_id is null or e.conversation_id = new.id)
        ) then
          new.webhook_events_from := old.event_count + 1;
        end if;
        return new;
      end
      $$;
      create trigger webhook_conversation_events before update of event_count on conversations
        for each row when (new.event_count > old.event_count) execute function webhook_events_owed();

      drop trigger webhook_conversation_updated on conversations;
      create trigger webhook_conversation_updated after update of execution_status on conversations
        for each row when (new.execution_status is distinct from old.execution_status) execute function webhook_conversation_changed();

      -- Migration20261125080000_webhook_outbox's function without its conversation.events message.
      create or replace function webhook_conversation_changed() returns trigger language plpgsql as $$
      declare
        wants text[];
        last_message json;
        last_text text;
        title text;
      begin
        select array_agg(t.type) into wants
        from webhook_endpoints e, unnest(coalesce(e.event_types, '{*}'::text[])) as t(type)
        where e.owner_id = new.owner_id and not e.disabled and (e.conversation_id is null or e.conversation_id = new.id);
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
              select string_agg(c.value->>'text', E'\\n' order by c.ordinality) into last_text
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
    `);
  }

  override async down(): Promise<void> {
    throw new Error('Migration20261127010000_webhook_events_marker cannot be reverted: restore Migration20261125080000_webhook_outbox\'s function and trigger instead');
  }
}
