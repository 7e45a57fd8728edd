import { Migration } from '@mikro-orm/migrations';

/**
 * `ingest_event_batches` became set-based and takes the group's payloads as one `json` array
 * (src/db/functions/ingest_event_batches.sql; why: docs/performance.md, "The ingest function"). Its
 * previous signature and `ingest_events`, which only the loop called, go.
 */
export class Migration20261123070000_set_based_ingest extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      drop function if exists ingest_event_batches(uuid[], uuid[], integer[], text[], text[], text[], text[], integer[], text[]);
      drop function if exists ingest_events(uuid, uuid, text[], text[], text[], text[], text[]);
    `);
  }
}
