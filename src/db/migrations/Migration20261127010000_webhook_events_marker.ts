import { Migration } from '@mikro-orm/migrations';

/**
 * `conversation.events` messages are no longer a row the ingest transaction inserts: the conversation
 * row it updates anyway says from which sequence number its events are still owed to the endpoints
 * (`webhook_events_from`), and the delivery worker makes the messages from the stored events
 * (docs/outbound-webhooks.md, "How it works"). The message row, with its key and the outbox index, was
 * what 10 endpoints still cost a one-event batch (about 13 % of its database time); setting a column of
 * a row already being updated costs next to nothing, and once it is set the ingest does not even look
 * for endpoints again until the worker has caught up.
 *
 * Still durable in the same transaction as the events: a committed batch leaves the mark, a rolled-back
 * one neither events nor mark. The worker splits what is owed by transaction (the events' `xmin`), so
 * one committed webhook transaction is still one message, with an id derived from the conversation and
 * its first sequence number: made twice (two instances, or a crash before the mark moved on), it is
 * stored once.
 *
 * The other conversation messages (`created`, `status_changed`, `finished`) stay rows written by the
 * trigger, which now fires on a status change only. The mark's trigger and the changed one live in
 * src/db/functions (webhook_events_owed.sql, webhook_conversation_changed.sql).
 */
export class Migration20261127010000_webhook_events_marker extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      alter table conversations add column webhook_events_from integer;
      -- What the worker polls: only conversations with events owed (a small index, rows leave it).
      create index conversations_webhook_events_idx on conversations (id) where webhook_events_from is not null;
    `);
  }

  override async down(): Promise<void> {
    throw new Error('Migration20261127010000_webhook_events_marker cannot be reverted: restore Migration20261125080000_webhook_outbox\'s function and trigger instead');
  }
}
