import { Migration } from '@mikro-orm/migrations';

/**
 * Live conversation activity on PostgreSQL's LISTEN/NOTIFY (channel `conversation_activity`,
 * docs/live-streams.md): the triggers announcing stored events and status changes live in
 * src/db/functions/notify_events_stored.sql and notify_status_changed.sql; the ingest function of
 * that time (`ingest_events` without deltas) goes.
 */
export class Migration20261122016000_live_notifications extends Migration {
  override async up(): Promise<void> {
    this.addSql('drop function if exists ingest_events(uuid, uuid, text[], text[], text[], text[]);');
  }

  override async down(): Promise<void> {
    this.addSql(`
      drop trigger if exists conversations_notify_status on conversations;
      drop function if exists notify_status_changed();
      drop trigger if exists conversation_events_notify on conversation_events;
      drop function if exists notify_events_stored();
    `);
  }
}
