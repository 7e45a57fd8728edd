import { Migration } from '@mikro-orm/migrations';

/**
 * The outbound message log's retention (src/retention/webhook-messages.ts) and a queue depth read per
 * scrape: messages found by age instead of a scan of the log, pending deliveries counted from an index of
 * only them (a delivery leaves it when it succeeds or fails) instead of a scan of every delivery ever made.
 */
export class Migration20261128220000_webhook_message_retention extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create index webhook_messages_created_idx on webhook_messages (created_at);
      create index webhook_deliveries_pending_idx on webhook_deliveries (endpoint_id) where state = 'pending';
    `);
  }

  override async down(): Promise<void> {
    this.addSql(`
      drop index if exists webhook_deliveries_pending_idx;
      drop index if exists webhook_messages_created_idx;
    `);
  }
}
