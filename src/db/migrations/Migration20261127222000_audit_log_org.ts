import { Migration } from '@mikro-orm/migrations';

/**
 * The audit log per organization (`GET /api/orgs/{org_id}/audit-log`): each row names the organization whose
 * resource it concerns, null for instance-level changes. No foreign key: deleting an organization must not
 * touch the append-only log (its trigger refuses updates), and earlier rows stay null for the same reason.
 */
export class Migration20261127222000_audit_log_org extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      alter table audit_log add column org_id uuid;
      create index audit_log_org_idx on audit_log (org_id, id desc) where org_id is not null;
    `);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table audit_log drop column org_id;`);
  }
}
