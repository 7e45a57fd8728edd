import { Migration } from '@mikro-orm/migrations';

/**
 * Bulk retry of a filtered message list (issue 38, docs/outbound-webhooks.md): a recovery is one case of
 * "a task re-sending a filtered set of an endpoint's messages in order", so `webhook_recover_tasks` holds
 * both kinds, with the same lease and cursor: `kind` (`recover`, `retry`), the delivery state the task
 * re-sends (`status`, `failed` for a recovery), and the optional `event_type` and `conversation_id` filters.
 */
export class Migration20261127160000_webhook_bulk_retry extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      alter table webhook_recover_tasks
        add column kind text not null default 'recover' check (kind in ('recover', 'retry')),
        add column status text not null default 'failed' check (status in ('failed', 'succeeded')),
        add column event_type text,
        add column conversation_id uuid;
    `);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table webhook_recover_tasks drop column kind, drop column status, drop column event_type, drop column conversation_id;`);
  }
}
