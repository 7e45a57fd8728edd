import { Migration } from '@mikro-orm/migrations';

/**
 * Created `ingest_events`, the webhook's write in one round trip. Its successor,
 * `ingest_event_batches`, lives in src/db/functions/ingest_event_batches.sql (applied after the
 * migrations), so there is nothing left to create here.
 */
export class Migration20261122010000_ingest_function extends Migration {
  override async up(): Promise<void> {}

  override async down(): Promise<void> {
    this.addSql('drop function if exists ingest_events(uuid, uuid, jsonb);');
  }
}
