import { Migration } from '@mikro-orm/migrations';

/**
 * Outbound webhooks (docs/outbound-webhooks.md): endpoints, one message per endpoint and cause, the
 * attempts of each, and the triggers that store messages in the same transaction as their cause.
 *
 * Messages come from triggers, not from the ingest function: `ingest_event_batches` (replaced by
 * other migrations) is left alone, and every path that changes a conversation is covered.
 * - `conversations` insert → `conversation.created`;
 * - `conversations` update where `event_count` grew → `conversation.events` (from_seq..to_seq: the
 *   events of the committed batch, or of the group's batches of that conversation); where
 *   `execution_status` changed → `conversation.status_changed`, and `conversation.finished` when it
 *   became finished, error or stuck;
 * - `credit_ledger` insert (a completed checkout) → `checkout.completed`.
 * Each trigger first probes `webhook_endpoints_owner_idx`: an owner without endpoints costs one
 * index lookup per conversation and transaction. A cause's messages get one pg-boss job inserted into
 * `pgboss.job` (the job table pg-boss documents for inserts from SQL and triggers); pg-boss's schema
 * is installed by `migrate()` right after these migrations.
 */
export class Migration20261125020000_outbound_webhooks extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table webhook_endpoints (
        id uuid primary key,
        owner_id uuid not null references users (id) on delete cascade,
        url text not null,
        description text not null default '',
        event_types text[],
        conversation_id uuid,
        disabled boolean not null default false,
        disabled_reason text,
        secret text not null,
        previous_secret text,
        previous_secret_until timestamptz,
        failing_since timestamptz,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      );
      create index webhook_endpoints_owner_idx on webhook_endpoints (owner_id) where not disabled;
      create index webhook_endpoints_all_owner_idx on webhook_endpoints (owner_id, created_at);

      create table webhook_messages (
        id text primary key,
        endpoint_id uuid not null references webhook_endpoints (id) on delete cascade,
        type text not null,
        data jsonb not null,
        state text not null default 'pending' check (state in ('pending', 'succeeded', 'failed')),
        attempts integer not null default 0,
        last_status_code integer,
        last_error text,
        next_attempt_at timestamptz,
        created_at timestamptz not null default now()
      );
      create index webhook_messages_endpoint_idx on webhook_messages (endpoint_id, created_at desc, id desc);

      create table webhook_attempts (
        message_id text not null references webhook_messages (id) on delete cascade,
        attempt integer not null,
        started_at timestamptz not null,
        duration_ms integer not null,
        status_code integer,
        error text,
        response_excerpt text,
        primary key (message_id, attempt)
      );

      -- One message per matching endpoint and one job for their first attempts; returns how many messages.
      create function webhook_enqueue(p_owner uuid, p_conversation uuid, p_type text, p_data jsonb)
      returns integer language plpgsql as $$
      declare
        queued integer;
      begin
        with messages as (
          insert into webhook_messages (id, endpoint_id, type, data, next_attempt_at)
          select 'msg_' || replace(gen_random_uuid()::text, '-', ''), e.id, p_type, p_data, now()
          from webhook_endpoints e
          where e.owner_id = p_owner and not e.disabled
            and (e.event_types is null or p_type = any (e.event_types))
            and (e.conversation_id is null or e.conversation_id = p_conversation)
          returning id
        ), first_attempts as (
          -- One job for the first attempt of every endpoint's message (made in parallel): one row
          -- in pg-boss's table per cause, not per endpoint. Retries get a job per message.
          insert into pgboss.job (name, data, retry_limit, retry_delay, expire_seconds, policy)
          select q.name, jsonb_build_object('message_ids', array_agg(m.id), 'attempt', 1), q.retry_limit, q.retry_delay, q.expire_seconds, q.policy
          from messages m cross join pgboss.queue q
          where q.name = 'webhook-delivery'
          group by q.name, q.retry_limit, q.retry_delay, q.expire_seconds, q.policy
          returning data
        )
        select coalesce(sum(jsonb_array_length(data->'message_ids')), 0) into queued from first_attempts;
        return queued;
      end
      $$;

      create function webhook_conversation_changed() returns trigger language plpgsql as $$
      declare
        last_message json;
        last_text text;
        title text;
      begin
        if not exists (select 1 from webhook_endpoints e where e.owner_id = new.owner_id and not e.disabled) then
          return null;
        end if;
        if tg_op = 'INSERT' then
          perform webhook_enqueue(new.owner_id, new.id, 'conversation.created',
            jsonb_build_object('conversation_id', new.id, 'created_at', new.created_at));
          return null;
        end if;
        if new.event_count > old.event_count then
          perform webhook_enqueue(new.owner_id, new.id, 'conversation.events',
            jsonb_build_object('conversation_id', new.id, 'from_seq', old.event_count + 1, 'to_seq', new.event_count));
        end if;
        if new.execution_status is distinct from old.execution_status then
          perform webhook_enqueue(new.owner_id, new.id, 'conversation.status_changed',
            jsonb_build_object('conversation_id', new.id, 'from', old.execution_status, 'to', new.execution_status));
          if new.execution_status in ('finished', 'error', 'stuck') then
            select e.payload into last_message from conversation_events e
            where e.conversation_id = new.id and e.kind = 'MessageEvent' and e.payload->>'source' = 'agent'
            order by e.seq desc limit 1;
            if last_message is not null then
              select string_agg(c.value->>'text', E'\\n' order by c.ordinality) into last_text
              from json_array_elements(coalesce(last_message->'llm_message'->'content', '[]'::json)) with ordinality c
              where c.value->>'type' = 'text';
            end if;
            select i.title #>> '{}' into title from conversation_infos i where i.conversation_id = new.id;
            perform webhook_enqueue(new.owner_id, new.id, 'conversation.finished',
              jsonb_build_object('conversation_id', new.id, 'execution_status', new.execution_status, 'title', title,
                'event_count', new.event_count, 'last_agent_message', last_text));
          end if;
        end if;
        return null;
      end
      $$;

      create trigger webhook_conversation_created after insert on conversations
        for each row execute function webhook_conversation_changed();
      create trigger webhook_conversation_updated after update of event_count, execution_status on conversations
        for each row when (new.event_count <> old.event_count or new.execution_status is distinct from old.execution_status)
        execute function webhook_conversation_changed();

      create function webhook_checkout_completed() returns trigger language plpgsql as $$
      begin
        if exists (select 1 from webhook_endpoints e where e.owner_id = new.user_id and not e.disabled) then
          perform webhook_enqueue(new.user_id, null, 'checkout.completed',
            jsonb_build_object('session_id', new.checkout_session_id, 'amount_usd', new.amount_usd));
        end if;
        return null;
      end
      $$;
      create trigger webhook_checkout_completed after insert on credit_ledger
        for each row execute function webhook_checkout_completed();
    `);
  }

  override async down(): Promise<void> {
    this.addSql(`
      drop trigger webhook_checkout_completed on credit_ledger;
      drop trigger webhook_conversation_updated on conversations;
      drop trigger webhook_conversation_created on conversations;
      drop function webhook_checkout_completed();
      drop function webhook_conversation_changed();
      drop function webhook_enqueue(uuid, uuid, text, jsonb);
      drop table webhook_attempts;
      drop table webhook_messages;
      drop table webhook_endpoints;
    `);
  }
}
