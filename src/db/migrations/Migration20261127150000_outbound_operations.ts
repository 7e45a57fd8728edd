import { Migration } from '@mikro-orm/migrations';

/**
 * Outbound webhooks run in production (issue 38, docs/outbound-webhooks.md):
 * - `webhook_recover_tasks`: a recovery of an endpoint's failed messages in a window, run in order by
 *   one worker at a time (a lease another instance takes over when it lapses), its progress kept here;
 * - `webhook_deliveries_failed_idx`: the failed deliveries of an endpoint in time order, what a
 *   recovery walks (small: only failed rows are in it);
 * - `webhook_endpoints.headers`: custom headers, a JSON object encrypted with the secret box (values such as
 *   `Authorization` are secrets); `conversation_ids` and `tags`: filters at fan-out;
 * - `webhook_messages.source_endpoint_id`: an operational message (`endpoint.disabled`, …) names the
 *   endpoint it is about, which never receives it;
 * - `webhook_attempts_endpoint_idx`: an endpoint's attempts by time, for its stats;
 * - `webhook_endpoints.rate_limit` and `webhook_endpoint_throttle`: messages a second per endpoint, the
 *   next slot held in the database so that every instance keeps to it.
 */
export class Migration20261127150000_outbound_operations extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      alter table webhook_endpoints
        add column headers text,
        add column conversation_ids uuid[],
        add column tags jsonb,
        add column rate_limit integer;

      -- The next free slot of each rate-limited endpoint, on the database's clock: every instance takes its turn here.
      create table webhook_endpoint_throttle (
        endpoint_id uuid primary key references webhook_endpoints (id) on delete cascade,
        next_at timestamptz not null
      );
      alter table webhook_messages add column source_endpoint_id uuid;

      create index webhook_deliveries_failed_idx on webhook_deliveries (endpoint_id, created_at, message_id) where state = 'failed';
      create index webhook_attempts_endpoint_idx on webhook_attempts (endpoint_id, started_at);

      create table webhook_recover_tasks (
        id uuid primary key,
        endpoint_id uuid not null references webhook_endpoints (id) on delete cascade,
        since timestamptz not null,
        until timestamptz not null,
        state text not null default 'running' check (state in ('running', 'completed', 'failed')),
        total integer not null,
        sent integer not null default 0,
        succeeded integer not null default 0,
        -- The last delivery handled, in (created_at, message_id) order: where the task goes on.
        cursor_created_at timestamptz,
        cursor_message_id text,
        last_error text,
        lease_until timestamptz,
        created_at timestamptz not null default now(),
        finished_at timestamptz
      );
      create index webhook_recover_tasks_running_idx on webhook_recover_tasks (lease_until) where state = 'running';
      create index webhook_recover_tasks_endpoint_idx on webhook_recover_tasks (endpoint_id, created_at);
    `);
  }

  override async down(): Promise<void> {
    this.addSql(`
      drop table webhook_recover_tasks;
      drop table webhook_endpoint_throttle;
      drop index webhook_attempts_endpoint_idx;
      drop index webhook_deliveries_failed_idx;
      alter table webhook_messages drop column source_endpoint_id;
      alter table webhook_endpoints drop column headers, drop column conversation_ids, drop column tags, drop column rate_limit;
    `);
  }
}
