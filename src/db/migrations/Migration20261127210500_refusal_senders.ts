import { Migration } from '@mikro-orm/migrations';

/**
 * A refused batch's owner is now an organization (`owner_id`); the person whose session API key sent it is
 * kept beside it. Rows refused before organizations have none: their owner was that user.
 */
export class Migration20261127210500_refusal_senders extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table refused_deliveries add column sender_id uuid;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table refused_deliveries drop column sender_id;`);
  }
}
