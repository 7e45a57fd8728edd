import { Migration } from '@mikro-orm/migrations';

/**
 * Event payloads are stored as `json`, not `jsonb`: `json` keeps the text exactly as written,
 * including the `\u0000` escapes and lone surrogates (`\ud800`) of arbitrary agent output, and
 * numbers of any size and precision, all of which `jsonb` refuses or normalises. The ingest function
 * of that time (`ingest_events` taking one `jsonb` document) goes.
 */
export class Migration20261122015000_lossless_payloads extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      alter table conversation_events alter column payload type json using payload::text::json;
      drop function if exists ingest_events(uuid, uuid, jsonb);
    `);
  }

  override async down(): Promise<void> {
    // Payloads holding what jsonb refuses cannot go back; this fails rather than lose them.
    this.addSql('alter table conversation_events alter column payload type jsonb using payload::jsonb;');
  }
}
