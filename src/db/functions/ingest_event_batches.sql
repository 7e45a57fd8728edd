-- The webhook's whole write: a group of batches stored in one statement, one transaction, one commit
-- (src/conversations/group-commit.ts groups them; ConversationService.ingest calls this).
--
-- Batch `i` is `conversations[i]`/`owners[i]`; event `k` belongs to batch `event_batches[k]` and is
-- `event_ids[k]`/`kinds[k]`/`statuses[k]`/`event_times[k]`/`sources[k]` and element `k` of the JSON array
-- `payloads` (`json`, not `jsonb`: each element keeps the exact text it was sent with) and of `unrecognized`
-- (the `accept-unknown` marker, JSON null for a known event; the whole array null when no event has one,
-- as strict groups always pass); delta `k` belongs to
-- batch `delta_batches[k]`. The caller orders the batches by conversation and sends no event id twice for
-- one conversation and owner. The outcome is the one of storing the batches one after the other:
-- - a conversation that does not exist yet is created for the first batch naming it;
-- - a batch for a conversation its caller does not own writes and announces nothing and comes back with
--   the owner (the application answers 403); the other batches of the group are stored;
-- - events already stored are skipped (first write wins), the others get dense sequence numbers in arrival
--   order (`event_time` null: the time received); `stored` counts each batch's new events;
-- - a conversation's execution status becomes the last status its new events carry;
-- - a conversation with new events is marked for the search indexer (`search_from`).
-- Conversations are locked in id order, so concurrent groups cannot deadlock. Notifications on
-- `conversation_activity` keep their order within a conversation: deltas (after the ownership check, so
-- nobody publishes into another's conversation), then the stored events, then the status.
-- Why set-based, a lateral probe, and these parameter types: docs/performance.md, "The ingest function".
create or replace function ingest_event_batches(
  conversations uuid[], owners uuid[], event_batches integer[], event_ids text[], kinds text[],
  statuses text[], payloads json, delta_batches integer[], deltas text[],
  event_times timestamptz[], sources text[], unrecognized json default null)
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
    select e.batch, b.conversation, b.last_seq, e.event_id, e.kind, e.status, e.payload, e.ord,
      e.event_time, e.source, e.marker
    from rows from (unnest(event_batches, event_ids, kinds, statuses), json_array_elements(payloads),
        unnest(event_times, sources), json_array_elements(unrecognized))
      with ordinality as e(batch, event_id, kind, status, payload, event_time, source, marker, ord)
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
    insert into conversation_events (conversation_id, seq, event_id, kind, payload, event_time, source, unrecognized)
    select f.conversation, f.last_seq + row_number() over (partition by f.conversation order by f.ord),
      f.event_id, f.kind, f.payload, coalesce(f.event_time, now()), f.source,
      case when json_typeof(f.marker) = 'object' then f.marker end
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
      -- The search indexer's mark: new events are owed from here (src/search/indexer.ts).
      search_from = case when x.fresh_count > 0 then coalesce(c.search_from, c.event_count + 1) else c.search_from end,
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
