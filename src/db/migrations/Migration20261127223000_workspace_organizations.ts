import { Migration } from '@mikro-orm/migrations';

/**
 * Issue-tracker workspaces belong to an organization (docs/workspaces.md): its admins register and change
 * them, its members link to them. Each existing workspace goes to its admin's personal organization, whose
 * id is the admin's. `admin_user_id` stays as the person who registered it; deleting that person no
 * longer deletes the organization's workspace.
 */
export class Migration20261127223000_workspace_organizations extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      alter table workspaces add column owner_id uuid references organizations (id) on delete cascade;
      update workspaces set owner_id = admin_user_id;
      alter table workspaces alter column owner_id set not null;
      create index workspaces_owner_idx on workspaces (owner_id);

      alter table workspaces alter column admin_user_id drop not null;
      alter table workspaces drop constraint workspaces_admin_user_id_fkey;
      alter table workspaces add constraint workspaces_admin_user_id_fkey
        foreign key (admin_user_id) references users (id) on delete set null;
    `);
  }

  override async down(): Promise<void> {
    // Before organizations a workspace needed its admin: a personal organization's workspace whose registrant
    // is gone goes back to that organization's user; one no user can hold is dropped.
    this.addSql(`
      update workspaces set admin_user_id = owner_id where admin_user_id is null and exists (select 1 from users where id = owner_id);
      delete from workspaces where admin_user_id is null;
      alter table workspaces drop constraint workspaces_admin_user_id_fkey;
      alter table workspaces add constraint workspaces_admin_user_id_fkey
        foreign key (admin_user_id) references users (id) on delete cascade;
      alter table workspaces alter column admin_user_id set not null;
      alter table workspaces drop column owner_id;
    `);
  }
}
