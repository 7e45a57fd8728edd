import { Migration } from '@mikro-orm/migrations';

/**
 * Stream tickets: browsers cannot set headers on an EventSource, so they trade their access token
 * for a short-lived, single-use ticket (`POST …/events/stream-tickets`) and pass it in the query
 * string of `GET …/events/stream`. Stored hashed (like credentials), in the database so that any
 * instance can redeem a ticket another instance issued; redeeming deletes it.
 */
export class Migration20261123050000_live_streams extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table stream_tickets (
        ticket_hash char(64) primary key,
        credential_id uuid not null references credentials (id) on delete cascade,
        conversation_id uuid not null references conversations (id) on delete cascade,
        expires_at timestamptz not null,
        created_at timestamptz not null default now()
      );
      create index stream_tickets_expires_at_idx on stream_tickets (expires_at);
    `);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists stream_tickets;');
  }
}
