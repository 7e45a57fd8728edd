import { Migration } from '@mikro-orm/migrations';

/**
 * Administration over HTTP (issue 22): suspended users, named and expiring keys, and the audit log.
 *
 * `audit_log` is append-only as a property of the database: a row trigger
 * (src/db/functions/audit_log_refuse_change.sql) refuses UPDATE and DELETE for everyone, the table owner included. TRUNCATE is a statement of its own that row
 * triggers do not see; it is left possible on purpose (the tests empty every table between tests,
 * and only the table owner may truncate). A deployment that wants to forbid it too runs the server
 * as a role that does not own the table and is granted only SELECT and INSERT on it.
 * The log has no foreign keys, so nothing can cascade into it and it outlives what it names.
 */
export class Migration20261125030000_administration extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      alter table users add column suspended_at timestamptz;

      alter table credentials
        add column name varchar(100),
        add column prefix varchar(8),
        add column expires_at timestamptz;
      create index credentials_user_idx on credentials (user_id, created_at desc);

      create table audit_log (
        id bigint generated always as identity primary key,
        occurred_at timestamptz not null default now(),
        actor varchar(320) not null,
        action varchar(100) not null,
        target_type varchar(50) not null,
        target_id varchar(255) not null,
        request_id varchar(100),
        summary jsonb not null default '{}'
      );
      create index audit_log_actor_idx on audit_log (actor, id desc);
      create index audit_log_action_idx on audit_log (action, id desc);
      create index audit_log_target_idx on audit_log (target_type, target_id, id desc);
      create index audit_log_occurred_at_idx on audit_log (occurred_at);
    `);
  }

  override async down(): Promise<void> {
    this.addSql(`
      drop table audit_log;
      drop function if exists audit_log_refuse_change();
      drop index credentials_user_idx;
      alter table credentials drop column name, drop column prefix, drop column expires_at;
      alter table users drop column suspended_at;
    `);
  }
}
