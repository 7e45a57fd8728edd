import { Migration } from '@mikro-orm/migrations';

/**
 * `ingest_pressure`: how hard each instance's webhook is pressed, reported every second while it is, so that
 * delivery on other instances yields to it (src/outbound/shared-pressure.ts). Unlogged: a second's figure
 * is worth nothing after a crash, and it costs no WAL.
 */
export class Migration20261128000000_ingest_pressure extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create unlogged table ingest_pressure (
        instance_id uuid primary key,
        rest_factor real not null check (rest_factor >= 0),
        reported_at timestamptz not null default now()
      );
    `);
  }

  override async down(): Promise<void> {
    this.addSql('drop table ingest_pressure;');
  }
}
