import { Migration } from '@mikro-orm/migrations';

/**
 * `rate_limit_instances`: one row per running server instance, refreshed by a heartbeat every 5 s
 * off the request path; each instance enforces 1/N of every rate limit, N the instances seen lately
 * (docs/operations.md, "Rate limits"). `idempotency_records`: the first response to a POST sent with
 * an `Idempotency-Key`, per credential owner and key, for 24 h; `status` null while the first request
 * is in flight; `response` sealed by the secret box (it may hold a created key).
 */
export class Migration20261127140000_rate_limits_and_idempotency extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table rate_limit_instances (
        instance_id uuid primary key,
        seen_at timestamptz not null default now()
      );

      create table idempotency_records (
        owner_id uuid not null,
        idempotency_key text not null,
        operation_id text not null,
        request_hash bytea not null,
        status smallint,
        response text,
        created_at timestamptz not null default now(),
        expires_at timestamptz not null,
        primary key (owner_id, idempotency_key)
      );
      create index idempotency_records_expires_idx on idempotency_records (expires_at);
    `);
  }

  override async down(): Promise<void> {
    this.addSql('drop table idempotency_records; drop table rate_limit_instances;');
  }
}
