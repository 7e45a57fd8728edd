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
 * `ingest_event_batches` (latest: Migration20261123070000_set_based_ingest) changes in one way only:
 * two more parameters, `event_times timestamptz[]` and `sources text[]` (parallel to `event_ids`),
 * inserted into the two new columns (`coalesce(event_time, now())`: received time when null).
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

      drop function ingest_event_batches(uuid[], uuid[], integer[], text[], text[], text[], json, integer[], text[]);
      ${ingestEventBatchesSql(true)}
    `);
  }

  override async down(): Promise<void> {
    this.addSql(`
      drop function ingest_event_batches(uuid[], uuid[], integer[], text[], text[], text[], json, integer[], text[], timestamptz[], text[]);
      ${ingestEventBatchesSql(false)}
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

/**
 * `ingest_event_batches` of Migration20261123070000_set_based_ingest, with (`search`) or without
 * (as it was) the `event_times` and `sources` parameters: the difference is the `${'$'}{…}` parts.
 */
function ingestEventBatchesSql(search: boolean): string {
  const when = (text: string) => (search ? text : '');
  return `
      create function ingest_event_batches(
        conversations uuid[], owners uuid[], event_batches integer[], event_ids text[], kinds text[],
        statuses text[], payloads json, delta_batches integer[], deltas text[]${when(`,
        event_times timestamptz[], sources text[]`)})
      returns table (batch integer, owner_id uuid, stored integer)
      language plpgsql as $$
      declare
        locked_ids uuid[];
        locked_owners uuid[];
        locked_counts integer[];
        delta text;
      begin
        -- 1. The conversations that do not exist yet, each for the first batch naming it.
        insert into conversations (id, owner_id, created_at, updated_at)
        select distinct on (b.conversation) b.conversation, b.owner, date_trunc('milliseconds', now()), now()
        from unnest(conversations, owners) with ordinality as b(conversation, owner, i)
        order by b.conversation, b.i
        on conflict (id) do nothing;

        -- 2. Every conversation of the group locked, in id order; its owner and event count.
        select array_agg(l.id), array_agg(l.owner_id), array_agg(l.event_count)
        into locked_ids, locked_owners, locked_counts
        from (select c.id, c.owner_id, c.event_count from conversations c
              where c.id = any (conversations) order by c.id for update) l;

        -- 3. The deltas of the batches whose callers own their conversation, in order.
        for delta in
          select d.delta
          from unnest(delta_batches, deltas) with ordinality as d(batch, delta, ord)
          join unnest(conversations, owners) with ordinality as b(conversation, owner, i) on b.i = d.batch
          join unnest(locked_ids, locked_owners) as cv(id, owner_id) on cv.id = b.conversation
          where cv.owner_id = b.owner
          order by d.ord
        loop
          perform pg_notify('conversation_activity', delta);
        end loop;

        -- 4. The new events of those batches, numbered on from each conversation's count; the
        --    conversations updated; one outcome per batch.
        return query
        with batches as (
          select b.i::integer as batch, b.conversation, b.owner, cv.owner_id as current_owner, cv.last_seq
          from unnest(conversations, owners) with ordinality as b(conversation, owner, i)
          join unnest(locked_ids, locked_owners, locked_counts) as cv(id, owner_id, last_seq) on cv.id = b.conversation
        ),
        fresh as (
          select e.batch, b.conversation, b.last_seq, e.event_id, e.kind, e.status, e.payload, e.ord${when(`,
            e.event_time, e.source`)}
          from rows from (unnest(event_batches, event_ids, kinds, statuses), json_array_elements(payloads)${when(`,
              unnest(event_times, sources)`)})
            with ordinality as e(batch, event_id, kind, status, payload, ${when('event_time, source, ')}ord)
          join batches b on b.batch = e.batch
          -- One index probe per event. Not NOT EXISTS: planned while the table is still empty
          -- (a new database; PL/pgSQL keeps the plan), the anti-join it becomes was seen scanning the
          -- whole unique index by event_id alone, ever slower as the table grew. A lateral subquery
          -- with a limit stays a lookup by the full key.
          left join lateral (
            select true as found from conversation_events stored
            where stored.conversation_id = b.conversation and stored.event_id = e.event_id
            limit 1
          ) already on true
          where b.current_owner = b.owner and already.found is null
        ),
        inserted as (
          insert into conversation_events (conversation_id, seq, event_id, kind, payload${when(', event_time, source')})
          select f.conversation, f.last_seq + row_number() over (partition by f.conversation order by f.ord),
            f.event_id, f.kind, f.payload${when(', coalesce(f.event_time, now()), f.source')}
          from fresh f
          returning conversation_id
        ),
        -- Counted from what was inserted: the update below then runs after the insert, so that the
        -- stored events are announced before the status change (see the notification order above).
        inserted_counts as (
          select i.conversation_id as conversation, count(*) as fresh_count from inserted i group by i.conversation_id
        ),
        last_statuses as (
          select f.conversation, (array_agg(f.status order by f.ord desc))[1] as status
          from fresh f where f.status is not null group by f.conversation
        ),
        updated as (
          update conversations c set
            event_count = c.event_count + x.fresh_count,
            execution_status = coalesce(x.status, c.execution_status),
            last_event_at = case when x.fresh_count > 0 then now() else c.last_event_at end,
            updated_at = now()
          from (
            select distinct b.conversation, coalesce(n.fresh_count, 0) as fresh_count, l.status
            from batches b
            left join inserted_counts n using (conversation)
            left join last_statuses l using (conversation)
            where b.current_owner = b.owner
          ) x
          where c.id = x.conversation
        )
        select b.batch, b.current_owner, coalesce(s.stored, 0)::integer
        from batches b
        left join (select f.batch, count(*) as stored from fresh f group by f.batch) s using (batch)
        order by b.batch;
      end
      $$;
`;
}
