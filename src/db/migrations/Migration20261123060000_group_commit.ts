import { Migration } from '@mikro-orm/migrations';

/**
 * Created the first `ingest_event_batches` (group commit: several webhook batches in one statement,
 * see src/conversations/group-commit.ts). Its current body lives in
 * src/db/functions/ingest_event_batches.sql (applied after the migrations): nothing to create here.
 */
export class Migration20261123060000_group_commit extends Migration {
  override async up(): Promise<void> {}

  override async down(): Promise<void> {
    this.addSql(
      'drop function if exists ingest_event_batches(uuid[], uuid[], integer[], text[], text[], text[], text[], integer[], text[]);',
    );
  }
}
