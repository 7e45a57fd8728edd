import { Migration } from '@mikro-orm/migrations';

/**
 * Search: what the event and conversation filters read, as columns, and the indexes they seek on
 * (see docs/search.md for the queries and their plans).
 *
 * Events: `event_time` (the event's own `timestamp` when it is ISO 8601, else the time it was
 * received: `src/conversations/event-time.ts` decides at ingest) and `source`, both filled by
 * `ingest_event_batches`. Two indexes: `(conversation_id, kind, seq)` for kind filters in either
 * order and their counts, `(conversation_id, event_time, seq)` for time ranges. No index on
 * `source` (a filter on it alone reads the conversation's events in seq order).
 *
 * Conversations: `renamed_title` (the owner's rename while it holds), `title_search` (the title
 * shown, as plain text: `\u0000` and lone surrogates, which `text` cannot hold, become U+FFFD),
 * `parent_conversation_id` and `tags` from the agent-server's ConversationInfo, with a trigram index
 * for `q`, a GIN index for `tag` and one for `parent_conversation_id`. `updated_at` gets no index on
 * purpose: the webhook updates it on every delivery, and an index on it would end the HOT updates
 * the table's fillfactor is there for (see the initial migration). Infos get
 * `forked_from_conversation_id`.
 *
 * `ingest_event_batches` (src/db/functions/ingest_event_batches.sql) gained two parameters here,
 * `event_times timestamptz[]` and `sources text[]`, for the two new columns; its previous signature goes.
 *
 * Rows stored before this migration are filled from their payloads here, by the same rule written
 * in SQL (a payload or title PostgreSQL cannot convert leaves the column at its fallback).
 */
export class Migration20261125010000_search extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create extension if not exists pg_trgm;

      create or replace function pg_temp.iso_instant(value text) returns timestamptz language plpgsql as $$
      declare
        parts text[];
      begin
        parts := regexp_match(value,
          '^(\\d{4}-\\d{2}-\\d{2})(?:[T ](\\d{2}:\\d{2}(?::\\d{2}(?:[.,]\\d+)?)?))?(Z|z|[+-]\\d{2}(?::?\\d{2})?)?$');
        if parts is null then return null; end if;
        if parts[3] is null or upper(parts[3]) = 'Z' then
          return (parts[1] || ' ' || coalesce(replace(parts[2], ',', '.'), '00:00'))::timestamp at time zone 'UTC';
        end if;
        return (parts[1] || ' ' || coalesce(replace(parts[2], ',', '.'), '00:00') || parts[3])::timestamptz;
      exception when others then
        return null;
      end $$;

      create or replace function pg_temp.json_field(document json, field text) returns jsonb language plpgsql as $$
      begin
        return document::jsonb -> field;
      exception when others then
        return null;
      end $$;

      create or replace function pg_temp.plain_title(title json) returns text language plpgsql as $$
      begin
        return replace(title::text, '\\u0000', '\\ufffd')::jsonb #>> '{}';
      exception when others then
        return null;
      end $$;

      alter table conversation_events add column event_time timestamptz, add column source varchar(16);
      update conversation_events set
        event_time = coalesce(pg_temp.iso_instant(pg_temp.json_field(payload, 'timestamp') #>> '{}'), received_at),
        source = left(pg_temp.json_field(payload, 'source') #>> '{}', 16);
      alter table conversation_events alter column event_time set not null;
      create index conversation_events_kind_idx on conversation_events (conversation_id, kind, seq);
      create index conversation_events_time_idx on conversation_events (conversation_id, event_time, seq);

      alter table conversations
        add column renamed_title text,
        add column title_search text,
        add column parent_conversation_id uuid,
        add column tags jsonb;
      alter table conversation_infos add column forked_from_conversation_id uuid;

      update conversations c set
        title_search = pg_temp.plain_title(i.title),
        parent_conversation_id = case when pg_temp.json_field(i.info, 'parent_conversation_id') #>> '{}'
            ~* '^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$'
          then (pg_temp.json_field(i.info, 'parent_conversation_id') #>> '{}')::uuid end,
        tags = case when jsonb_typeof(pg_temp.json_field(i.info, 'tags')) = 'object'
          and pg_temp.json_field(i.info, 'tags') <> '{}'::jsonb then pg_temp.json_field(i.info, 'tags') end
      from conversation_infos i where i.conversation_id = c.id;
      update conversation_infos set forked_from_conversation_id =
        case when pg_temp.json_field(info, 'forked_from_conversation_id') #>> '{}'
            ~* '^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$'
          then (pg_temp.json_field(info, 'forked_from_conversation_id') #>> '{}')::uuid end;

      create index conversations_title_search_idx on conversations using gin (title_search gin_trgm_ops);
      create index conversations_tags_idx on conversations using gin (tags jsonb_path_ops);
      create index conversations_parent_idx on conversations (parent_conversation_id, created_at desc, id desc)
        where parent_conversation_id is not null;
      drop function pg_temp.iso_instant(text);
      drop function pg_temp.json_field(json, text);
      drop function pg_temp.plain_title(json);

      drop function if exists ingest_event_batches(uuid[], uuid[], integer[], text[], text[], text[], json, integer[], text[]);
    `);
  }

  override async down(): Promise<void> {
    this.addSql(`
      drop function if exists ingest_event_batches(uuid[], uuid[], integer[], text[], text[], text[], json, integer[], text[], timestamptz[], text[]);
      drop index if exists conversations_parent_idx;
      drop index if exists conversations_tags_idx;
      drop index if exists conversations_title_search_idx;
      alter table conversation_infos drop column forked_from_conversation_id;
      alter table conversations drop column renamed_title, drop column title_search,
        drop column parent_conversation_id, drop column tags;
      drop index if exists conversation_events_time_idx;
      drop index if exists conversation_events_kind_idx;
      alter table conversation_events drop column event_time, drop column source;
    `);
  }
}

