import { Migration } from '@mikro-orm/migrations';

/**
 * Share links (docs/sharing.md): read-only links to one conversation for anyone holding the token.
 * Only the token's SHA-256 is kept, unique, so a shared read is one index probe; links go with their
 * conversation (retention deletes them together).
 */
export class Migration20261127130000_share_links extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table share_links (
        id uuid primary key,
        conversation_id uuid not null references conversations (id) on delete cascade,
        token_hash char(64) not null,
        token_hint varchar(16) not null,
        created_by uuid not null,
        share_tags boolean not null default false,
        created_at timestamptz not null default date_trunc('milliseconds', now()),
        expires_at timestamptz,
        revoked_at timestamptz
      );
      create unique index share_links_token_hash_idx on share_links (token_hash);
      -- The owner's list of one conversation's links, newest first.
      create index share_links_conversation_idx on share_links (conversation_id, created_at desc);
    `);
  }

  override async down(): Promise<void> {
    this.addSql('drop table share_links;');
  }
}
