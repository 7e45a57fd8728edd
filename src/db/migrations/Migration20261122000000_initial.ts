import { Migration } from '@mikro-orm/migrations';

/** Users and their credentials, verified models, conversations and their event log. */
export class Migration20261122000000_initial extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table users (
        id uuid primary key,
        email varchar(320) not null,
        is_super_admin boolean not null default false,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      );
      -- e-mails are stored lower-cased, so this makes them unique case-insensitively
      create unique index users_email_key on users (email);

      create table credentials (
        id uuid primary key,
        user_id uuid not null references users (id) on delete cascade,
        kind varchar(20) not null check (kind in ('access_token', 'session_api_key')),
        secret_hash char(64) not null,
        created_at timestamptz not null default now(),
        last_used_at timestamptz,
        revoked_at timestamptz
      );
      create unique index credentials_secret_hash_key on credentials (secret_hash);
      create index credentials_user_id_idx on credentials (user_id);

      create table verified_models (
        id serial primary key,
        model_name varchar(255) not null,
        provider varchar(100) not null,
        is_enabled boolean not null default true,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        constraint verified_models_provider_model_name_key unique (provider, model_name)
      );

      -- fillfactor leaves room on each page, so the per-delivery counter update is a HOT update
      create table conversations (
        id uuid primary key,
        owner_id uuid not null references users (id),
        execution_status varchar(32),
        event_count integer not null default 0,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        last_event_at timestamptz
      ) with (fillfactor = 70);
      create index conversations_owner_newest_idx on conversations (owner_id, created_at desc, id desc);

      -- seq is dense per conversation (1, 2, 3, ...) and equals conversations.event_count at the top
      create table conversation_events (
        conversation_id uuid not null references conversations (id) on delete cascade,
        seq integer not null,
        event_id text not null,
        kind varchar(64) not null,
        payload jsonb not null,
        received_at timestamptz not null default now(),
        primary key (conversation_id, seq),
        constraint conversation_events_event_id_key unique (conversation_id, event_id)
      );
    `);
  }

  override async down(): Promise<void> {
    this.addSql(`
      drop table if exists conversation_events;
      drop table if exists conversations;
      drop table if exists verified_models;
      drop table if exists credentials;
      drop table if exists users;
    `);
  }
}
