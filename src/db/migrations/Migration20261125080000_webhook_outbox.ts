import { Migration } from '@mikro-orm/migrations';

/**
 * `webhook_messages` becomes the outbox the delivery workers poll (docs/outbound-webhooks.md, "How it
 * works"): the ingest transaction stores the message row and nothing else. Before, it also inserted a
 * pg-boss fan-out job per transaction into pg-boss's partitioned job table (about 5 % of a one-event
 * batch's database time, measured with scripts/measure-outbound-trigger.ts). Each worker now fans out new
 * messages every `OUTBOUND_WEBHOOK_DISPATCH_MS` (SKIP LOCKED; `webhook_messages_fanout_idx`) and
 * queues one pg-boss job per message for the first attempt to all its endpoints; retries stay one job
 * per endpoint. The triggers and `webhook_enqueue` are those of Migration20261125070000_webhook_fanout
 * without the job insert.
 *
 * The message's foreign key to `users` goes too: every message of a user's concurrent batches locked
 * the same `users` row (FOR KEY SHARE, a new MultiXact per locker), which cost 15 % of a message insert
 * at 8 concurrent transactions of one user (pgbench, synchronous_commit off). Users are never deleted
 * (their conversations reference them without a cascade); their endpoints, and with them the
 * deliveries, still cascade.
 */
export class Migration20261125080000_webhook_outbox extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create or replace function webhook_enqueue(p_owner uuid, p_conversation uuid, p_type text, p_data jsonb)
      returns integer language plpgsql as $$
      begin
        if not exists (
          select 1 from webhook_endpoints e
          where e.owner_id = p_owner and not e.disabled
            and (e.event_types is null or p_type = any (e.event_types))
            and (e.conversation_id is null or e.conversation_id = p_conversation)
        ) then
          return 0;
        end if;
        insert into webhook_messages (id, owner_id, conversation_id, type, data)
        values ('msg_' || replace(gen_random_uuid()::text, '-', ''), p_owner, p_conversation, p_type, p_data);
        return 1;
      end
      $$;

      -- The conversation trigger reads once which types the owner's enabled endpoints want for this
      -- conversation ('*': every type), then inserts the wanted messages itself: one index probe per
      -- conversation and change, not one per message type plus a call of webhook_enqueue each.
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
        if new.event_count > old.event_count and ('*' = any (wants) or 'conversation.events' = any (wants)) then
          insert into webhook_messages (id, owner_id, conversation_id, type, data)
          values ('msg_' || replace(gen_random_uuid()::text, '-', ''), new.owner_id, new.id, 'conversation.events',
            jsonb_build_object('conversation_id', new.id, 'from_seq', old.event_count + 1, 'to_seq', new.event_count));
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

      drop function webhook_queue_fanout();

      alter table webhook_messages drop constraint webhook_messages_owner_id_fkey;
    `);
  }

  override async down(): Promise<void> {
    throw new Error('Migration20261125080000_webhook_outbox cannot be reverted: restore Migration20261125070000_webhook_fanout\'s functions instead');
  }
}
