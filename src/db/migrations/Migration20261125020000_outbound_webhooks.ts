import { Migration } from '@mikro-orm/migrations';

/**
 * Outbound webhooks (docs/outbound-webhooks.md): endpoints, one message per endpoint and cause, the
 * attempts of each. The triggers that store messages in the same transaction as their cause live in
 * src/db/functions (webhook_conversation_changed.sql, webhook_checkout_completed.sql, webhook_enqueue.sql).
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
    `);
  }

  override async down(): Promise<void> {
    this.addSql(`
      drop trigger if exists webhook_checkout_completed on credit_ledger;
      drop trigger if exists webhook_conversation_updated on conversations;
      drop trigger if exists webhook_conversation_created on conversations;
      drop function if exists webhook_checkout_completed();
      drop function if exists webhook_conversation_changed();
      drop function if exists webhook_enqueue(uuid, uuid, text, jsonb);
      drop table webhook_attempts;
      drop table webhook_messages;
      drop table webhook_endpoints;
    `);
  }
}
