import { Migration } from '@mikro-orm/migrations';

/**
 * `webhook_messages` becomes the outbox the delivery workers poll (docs/outbound-webhooks.md, "How it
 * works"): the ingest transaction stores the message row and nothing else. Before, it also inserted a
 * pg-boss fan-out job per transaction into pg-boss's partitioned job table (about 5 % of a one-event
 * batch's database time, measured with scripts/measure-outbound-trigger.ts). Each worker now fans out new
 * messages every `OUTBOUND_WEBHOOK_DISPATCH_MS` (SKIP LOCKED; `webhook_messages_fanout_idx`) and
 * queues one pg-boss job per message for the first attempt to all its endpoints; retries stay one job
 * per endpoint. The triggers and `webhook_enqueue` (src/db/functions) lost the job insert here, and
 * `webhook_queue_fanout` goes.
 *
 * The message's foreign key to `users` goes too: every message of a user's concurrent batches locked
 * the same `users` row (FOR KEY SHARE, a new MultiXact per locker), which cost 15 % of a message insert
 * at 8 concurrent transactions of one user (pgbench, synchronous_commit off). Users are never deleted
 * (their conversations reference them without a cascade); their endpoints, and with them the
 * deliveries, still cascade.
 */
export class Migration20261125080000_webhook_outbox extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      drop function if exists webhook_queue_fanout();

      alter table webhook_messages drop constraint webhook_messages_owner_id_fkey;
    `);
  }

  override async down(): Promise<void> {
    throw new Error('Migration20261125080000_webhook_outbox cannot be reverted: restore Migration20261125070000_webhook_fanout\'s functions instead');
  }
}
