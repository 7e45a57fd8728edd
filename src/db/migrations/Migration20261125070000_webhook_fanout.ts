import { Migration } from '@mikro-orm/migrations';

/**
 * Outbound webhooks fan out at delivery, as Svix does (docs/outbound-webhooks.md, "How it works"):
 * the ingest transaction stores ONE `webhook_messages` row per cause (and one pg-boss fan-out job per
 * transaction), and the delivery worker expands each message into one `webhook_deliveries` row per
 * endpoint, with one job for its first attempt, outside the ingest transaction. Before, `webhook_enqueue` wrote one message row per subscribed endpoint in the
 * ingest transaction (10 endpoints: 10 rows per batch).
 *
 * - `webhook_messages` (new): the cause — id (the Standard Webhooks `webhook-id`, the same for every
 *   endpoint), owner, conversation (for endpoint filters), type, data, created_at, fanned_out.
 * - `webhook_deliveries` (the former per-endpoint `webhook_messages`, renamed): one message's state at
 *   one endpoint — pending/succeeded/failed, attempts, last status code/error, next attempt.
 * - `webhook_attempts` gains `endpoint_id`: its key is (message_id, endpoint_id, attempt).
 * Existing rows keep their ids: each former per-endpoint message becomes a message with one delivery.
 */
export class Migration20261125070000_webhook_fanout extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      alter table webhook_attempts drop constraint webhook_attempts_message_id_fkey;
      alter table webhook_attempts drop constraint webhook_attempts_pkey;

      alter table webhook_messages rename to webhook_deliveries;
      alter table webhook_deliveries rename column id to message_id;
      alter table webhook_deliveries drop constraint webhook_messages_pkey;
      alter index webhook_messages_endpoint_idx rename to webhook_deliveries_endpoint_idx;
      alter table webhook_deliveries rename constraint webhook_messages_state_check to webhook_deliveries_state_check;
      alter table webhook_deliveries rename constraint webhook_messages_endpoint_id_fkey to webhook_deliveries_endpoint_id_fkey;

      create table webhook_messages (
        id text primary key,
        owner_id uuid not null references users (id) on delete cascade,
        conversation_id uuid,
        type text not null,
        data jsonb not null,
        fanned_out boolean not null default false,
        created_at timestamptz not null default clock_timestamp()
      );
      insert into webhook_messages (id, owner_id, conversation_id, type, data, fanned_out, created_at)
      select d.message_id, e.owner_id,
             case when d.type like 'conversation.%' then (d.data->>'conversation_id')::uuid end,
             d.type, d.data, true, d.created_at
      from webhook_deliveries d join webhook_endpoints e on e.id = d.endpoint_id;

      alter table webhook_deliveries drop column type, drop column data;
      alter table webhook_deliveries add primary key (message_id, endpoint_id);
      alter table webhook_deliveries add constraint webhook_deliveries_message_id_fkey
        foreign key (message_id) references webhook_messages (id) on delete cascade;

      alter table webhook_attempts add column endpoint_id uuid;
      update webhook_attempts a set endpoint_id = d.endpoint_id from webhook_deliveries d where d.message_id = a.message_id;
      delete from webhook_attempts where endpoint_id is null;
      alter table webhook_attempts alter column endpoint_id set not null;
      alter table webhook_attempts add primary key (message_id, endpoint_id, attempt);
      alter table webhook_attempts add constraint webhook_attempts_delivery_fkey
        foreign key (message_id, endpoint_id) references webhook_deliveries (message_id, endpoint_id) on delete cascade;

      -- Jobs queued before this migration name a message without an endpoint: the worker finds its one delivery.

      -- Messages not fanned out yet: what a fan-out job looks for (small: rows leave it once fanned out).
      create index webhook_messages_fanout_idx on webhook_messages (created_at) where not fanned_out;

      -- The fan-out job of the current transaction, queued once (a transaction-local setting remembers
      -- it): a pg-boss job insert (a partitioned table) costs more than a message row.
      create function webhook_queue_fanout() returns void language plpgsql as $$
      begin
        if current_setting('webhook.fanout_queued', true) is distinct from 'on' then
          insert into pgboss.job (name, data, retry_limit, retry_delay, expire_seconds, policy)
          select q.name, '{"fanout": "pending"}'::jsonb, q.retry_limit, q.retry_delay, q.expire_seconds, q.policy
          from pgboss.queue q where q.name = 'webhook-delivery';
          perform set_config('webhook.fanout_queued', 'on', true);
        end if;
      end
      $$;

      -- One message for the cause when an enabled endpoint of the owner wants it (an EXISTS on
      -- webhook_endpoints_owner_idx), and the transaction's fan-out job. Returns the number of
      -- messages stored (0 or 1). For causes outside conversations (checkout.completed, billing).
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
        perform webhook_queue_fanout();
        return 1;
      end
      $$;

      -- The conversation trigger reads once which types the owner's enabled endpoints want for this
      -- conversation ('*': every type), then inserts the wanted messages itself: one index probe per
      -- conversation and change, not one per message type plus a call of webhook_enqueue each.
      create or replace function webhook_conversation_changed() returns trigger language plpgsql as $$
      declare
        wants text[];
        stored boolean := false;
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
            perform webhook_queue_fanout();
          end if;
          return null;
        end if;
        if new.event_count > old.event_count and ('*' = any (wants) or 'conversation.events' = any (wants)) then
          insert into webhook_messages (id, owner_id, conversation_id, type, data)
          values ('msg_' || replace(gen_random_uuid()::text, '-', ''), new.owner_id, new.id, 'conversation.events',
            jsonb_build_object('conversation_id', new.id, 'from_seq', old.event_count + 1, 'to_seq', new.event_count));
          stored := true;
        end if;
        if new.execution_status is distinct from old.execution_status then
          if '*' = any (wants) or 'conversation.status_changed' = any (wants) then
            insert into webhook_messages (id, owner_id, conversation_id, type, data)
            values ('msg_' || replace(gen_random_uuid()::text, '-', ''), new.owner_id, new.id, 'conversation.status_changed',
              jsonb_build_object('conversation_id', new.id, 'from', old.execution_status, 'to', new.execution_status));
            stored := true;
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
            stored := true;
          end if;
        end if;
        if stored then
          perform webhook_queue_fanout();
        end if;
        return null;
      end
      $$;
    `);
  }

  override async down(): Promise<void> {
    throw new Error('Migration20261125070000_webhook_fanout cannot be reverted: per-endpoint messages were merged');
  }
}
