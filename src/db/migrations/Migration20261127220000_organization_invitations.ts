import { Migration } from '@mikro-orm/migrations';

/**
 * Invitations to an organization (docs/organizations.md, "Invitations"): the token is shown once and only
 * its SHA-256 is kept, like a key's. An invitation names an e-mail address, not a user, so it can be
 * accepted by an account created after it.
 */
export class Migration20261127220000_organization_invitations extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table organization_invitations (
        id uuid primary key,
        org_id uuid not null references organizations (id) on delete cascade,
        email varchar(320) not null,
        role varchar(16) not null check (role in ('owner', 'admin', 'member', 'viewer')),
        token_hash varchar(64) not null unique,
        invited_by uuid references users (id) on delete set null,
        created_at timestamptz not null default now(),
        expires_at timestamptz not null,
        accepted_at timestamptz,
        accepted_by uuid references users (id) on delete set null,
        revoked_at timestamptz
      );
      -- The pending ones of an organization, and at most one pending invitation per address there.
      create unique index organization_invitations_pending_idx on organization_invitations (org_id, email)
        where accepted_at is null and revoked_at is null;
    `);
  }

  override async down(): Promise<void> {
    this.addSql('drop table organization_invitations;');
  }
}
