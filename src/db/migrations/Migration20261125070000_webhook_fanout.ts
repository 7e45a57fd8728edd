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
 * The triggers' functions of that time (and `webhook_queue_fanout`, gone since) were replaced in the
 * database by src/db/functions (webhook_enqueue.sql, webhook_conversation_changed.sql).
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
    `);
  }

  override async down(): Promise<void> {
    throw new Error('Migration20261125070000_webhook_fanout cannot be reverted: per-endpoint messages were merged');
  }
}
