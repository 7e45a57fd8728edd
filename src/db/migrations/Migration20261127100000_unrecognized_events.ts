import { Migration } from '@mikro-orm/migrations';

/**
 * Events stored under the `accept-unknown` policy (`WEBHOOK_EVENT_COMPATIBILITY`) carry what the
 * contract does not know of them: `conversation_events.unrecognized`, `{"kind": …, "properties": […]}`,
 * null for every event the contract knows. A partial index holds only the flagged rows, so a
 * conversation's `unrecognized_event_count` is a lookup in an index that is empty for most of them.
 *
 * `ingest_event_batches` (src/db/functions/ingest_event_batches.sql) gains a last parameter here,
 * `unrecognized json default null`, filling the new column; its previous signature goes.
 */
export class Migration20261127100000_unrecognized_events extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      alter table conversation_events add column unrecognized json;
      create index conversation_events_unrecognized_idx on conversation_events (conversation_id) where unrecognized is not null;
      drop function if exists ingest_event_batches(uuid[], uuid[], integer[], text[], text[], text[], json, integer[], text[], timestamptz[], text[]);
    `);
  }

  override async down(): Promise<void> {
    this.addSql(`
      drop function if exists ingest_event_batches(uuid[], uuid[], integer[], text[], text[], text[], json, integer[], text[], timestamptz[], text[], json);
      drop index if exists conversation_events_unrecognized_idx;
      alter table conversation_events drop column unrecognized;
    `);
  }
}
