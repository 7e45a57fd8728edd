import { Migration } from '@mikro-orm/migrations';

/**
 * Issue-tracker workspaces, the links of users to them, and the tracker's webhook deliveries.
 * Secrets are stored only as AES-256-GCM ciphertexts (`src/crypto/secret-box.ts`).
 */
export class Migration20261123020000_workspaces extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table workspaces (
        id serial primary key,
        name varchar(255) not null,
        admin_user_id uuid not null references users (id) on delete cascade,
        svc_acc_email varchar(320) not null,
        webhook_secret_ciphertext text not null,
        svc_acc_api_key_ciphertext text not null,
        cloud_id varchar(255) not null,
        is_active boolean not null default true,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        constraint workspaces_name_key unique (name)
      );
      create index workspaces_admin_user_id_idx on workspaces (admin_user_id);

      -- one row per (user, workspace), reactivated on relink; at most one active link per user
      create table workspace_links (
        id serial primary key,
        user_id uuid not null references users (id) on delete cascade,
        workspace_id integer not null references workspaces (id) on delete cascade,
        is_active boolean not null default true,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        constraint workspace_links_user_workspace_key unique (user_id, workspace_id)
      );
      create unique index workspace_links_one_active_per_user on workspace_links (user_id) where is_active;
      create index workspace_links_workspace_id_idx on workspace_links (workspace_id);

      -- payload is json (not jsonb): the delivery's text exactly as received
      create table tracker_deliveries (
        id bigserial primary key,
        workspace_id integer not null references workspaces (id) on delete cascade,
        delivery_id varchar(255) not null,
        payload json not null,
        received_at timestamptz not null default now(),
        constraint tracker_deliveries_workspace_delivery_key unique (workspace_id, delivery_id)
      );
    `);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists tracker_deliveries, workspace_links, workspaces;');
  }
}
