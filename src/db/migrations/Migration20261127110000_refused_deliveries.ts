import { Migration } from '@mikro-orm/migrations';

/**
 * The refusal ledger (docs/agent-server.md, "Seeing and replaying refusals"): every webhook batch
 * answered 413 or 422, one row per caller, conversation id as sent and body (its SHA-256, or its
 * announced length when it was not read), so a batch the agent-server retries a thousand times is one
 * row with its attempts counted. Written only when a batch is refused: accepted batches never touch it.
 * `delivery_refusal_notices` holds when each conversation's `conversation.delivery_refused` message
 * last went out, so that the check "at most once an hour" is one atomic upsert on any instance.
 */
export class Migration20261127110000_refused_deliveries extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table refused_deliveries (
        id bigserial primary key,
        owner_id uuid not null,
        conversation_id text not null,
        conversation_key uuid,
        status smallint not null check (status in (413, 422)),
        reason text not null,
        detail text not null,
        fingerprint text not null,
        body bytea,
        body_bytes bigint,
        event_count integer,
        attempts integer not null default 1,
        first_seen_at timestamptz not null default now(),
        last_seen_at timestamptz not null default now(),
        replayed_at timestamptz
      );
      create unique index refused_deliveries_fingerprint_idx on refused_deliveries (owner_id, conversation_id, fingerprint);
      -- Lists go newest first by id (the owner's, or everyone's by the primary key); retention by last_seen_at.
      create index refused_deliveries_owner_idx on refused_deliveries (owner_id, id desc);
      create index refused_deliveries_last_seen_idx on refused_deliveries (last_seen_at);
      create index refused_deliveries_conversation_idx on refused_deliveries (conversation_key, owner_id) where conversation_key is not null;

      create table delivery_refusal_notices (
        owner_id uuid not null,
        conversation_id uuid not null,
        sent_at timestamptz not null,
        primary key (owner_id, conversation_id)
      );
    `);
  }

  override async down(): Promise<void> {
    this.addSql('drop table delivery_refusal_notices; drop table refused_deliveries;');
  }
}
