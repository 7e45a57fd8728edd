import { Migration } from '@mikro-orm/migrations';

/**
 * Organizations own what users owned (docs/organizations.md). Every user gets a personal organization with
 * the user's own id, so each `owner_id` written before organizations already names its new owner: the
 * move is a change of foreign keys, not a rewrite of rows.
 */
export class Migration20261127210000_organizations extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table organizations (
        id uuid primary key,
        name varchar(100) not null,
        personal boolean not null default false,
        suspended_at timestamptz,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      );

      create table organization_members (
        org_id uuid not null references organizations (id) on delete cascade,
        user_id uuid not null references users (id) on delete cascade,
        role varchar(16) not null check (role in ('owner', 'admin', 'member', 'viewer')),
        created_at timestamptz not null default now(),
        primary key (org_id, user_id)
      );
      create index organization_members_user_idx on organization_members (user_id, org_id);

      insert into organizations (id, name, personal, created_at) select id, email, true, created_at from users;
      insert into organization_members (org_id, user_id, role, created_at) select id, id, 'owner', created_at from users;

      -- Null: the user's personal organization (the same id as the user).
      alter table users add column default_org_id uuid references organizations (id) on delete set null;

      -- New users get theirs from the trigger of src/db/functions/create_personal_organization.sql.

      -- A session API key acts in one organization; an access token chooses per request (X-Org-Id).
      alter table credentials add column org_id uuid references organizations (id) on delete cascade;
      update credentials set org_id = user_id where kind = 'session_api_key';
      create index credentials_org_idx on credentials (org_id, created_at desc) where org_id is not null;

      -- Credits and purchases belong to the organization, like everything else a user owned.
      alter table checkout_sessions rename column user_id to owner_id;
      alter table credit_ledger rename column user_id to owner_id;
    `);
    // Every owner column that named a user now names an organization, with the same delete rule.
    this.addSql(repointOwnerKeys('users', 'organizations'));
  }

  override async down(): Promise<void> {
    this.addSql(repointOwnerKeys('organizations', 'users'));
    this.addSql(`
      alter table credit_ledger rename column owner_id to user_id;
      alter table checkout_sessions rename column owner_id to user_id;
      alter table credentials drop column org_id;
      drop trigger if exists users_personal_organization on users;
      drop function if exists create_personal_organization();
      alter table users drop column default_org_id;
      drop table organization_members;
      drop table organizations;
    `);
  }
}

/** Every `owner_id` foreign key to `from` re-made to reference `to`, with the same name and delete rule. */
function repointOwnerKeys(from: 'users' | 'organizations', to: 'users' | 'organizations'): string {
  return `
    do $$
    declare fk record;
    begin
      for fk in
        select con.conname, con.conrelid::regclass as tbl, pg_get_constraintdef(con.oid) as def
        from pg_constraint con
        join pg_attribute a on a.attrelid = con.conrelid and a.attnum = con.conkey[1]
        where con.contype = 'f' and con.confrelid = '${from}'::regclass and a.attname = 'owner_id'
      loop
        execute format('alter table %s drop constraint %I', fk.tbl, fk.conname);
        execute format('alter table %s add constraint %I %s', fk.tbl, fk.conname,
          replace(fk.def, 'REFERENCES ${from}(id)', 'REFERENCES ${to}(id)'));
      end loop;
    end $$;
  `;
}
