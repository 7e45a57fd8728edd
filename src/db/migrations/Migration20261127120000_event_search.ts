import { Migration } from '@mikro-orm/migrations';

/**
 * Search inside conversations (docs/search.md): `event_search` holds, per stored event, the lexemes of
 * its searchable text with their positions (a `tsvector` made by the application, GIN-indexed: no parser,
 * dictionary or locale of the database takes part, so any script works alike on Debian's PostgreSQL and
 * the embedded one, which runs with `--no-locale`), with the owner, kind, source and time of its event
 * for the filters. `ordinal` orders hits
 * newest first: the indexer inserts under an advisory lock, so ordinals grow in commit order.
 *
 * The webhook only marks what is owed: `conversations.search_from`, the first sequence number not yet
 * indexed (null when all are), set by `ingest_event_batches` in the update it makes anyway. The indexer
 * (src/search/indexer.ts) inserts the rows and moves the mark in one transaction, so a crash loses no
 * event. Index rows go with their events (foreign key, cascade): retention deletes them too.
 *
 * Events stored before this migration are owed from sequence number 1: the indexer fills the index.
 */
export class Migration20261127120000_event_search extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table event_search (
        conversation_id uuid not null,
        seq integer not null,
        ordinal bigint generated always as identity,
        owner_id uuid not null,
        kind varchar(64) not null,
        source varchar(16),
        event_time timestamptz not null,
        lexemes tsvector not null,
        primary key (conversation_id, seq),
        foreign key (conversation_id, seq) references conversation_events (conversation_id, seq) on delete cascade
      );
      create index event_search_lexemes_idx on event_search using gin (lexemes);
      create index event_search_owner_idx on event_search (owner_id, ordinal desc);

      alter table conversations add column search_from integer;
      -- What the indexer polls: only conversations with events owed (a small index, rows leave it).
      create index conversations_search_pending_idx on conversations (id) where search_from is not null;
      update conversations set search_from = 1 where event_count > 0;
    `);
  }

  override async down(): Promise<void> {
    this.addSql(`
      drop index if exists conversations_search_pending_idx;
      alter table conversations drop column search_from;
      drop table if exists event_search;
    `);
  }
}
