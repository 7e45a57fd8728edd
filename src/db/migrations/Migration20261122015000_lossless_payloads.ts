import { Migration } from '@mikro-orm/migrations';
import { Migration20261122010000_ingest_function } from './Migration20261122010000_ingest_function.ts';

/** This version of `ingest_events`; the next migration's `down` restores it. */
export const INGEST_EVENTS_SQL = `
create function ingest_events(
  conversation uuid, owner uuid, event_ids text[], kinds text[], statuses text[], payloads text[])
returns table (owner_id uuid, stored integer)
language plpgsql as $$
declare
  current_owner uuid;
  last_seq integer;
  appended integer;
begin
  insert into conversations (id, owner_id, created_at, updated_at)
  values (conversation, owner, date_trunc('milliseconds', now()), now())
  on conflict (id) do nothing;
  -- A row lock, not a no-op update: no dead row version per delivery.
  select c.owner_id, c.event_count into current_owner, last_seq
  from conversations c where c.id = conversation
  for update;

  if current_owner <> owner then
    return query select current_owner, 0;
    return;
  end if;

  with incoming as (
    select * from unnest(event_ids, kinds, statuses, payloads) with ordinality
      as e(event_id, kind, status, payload, ord)
  ),
  fresh as (
    select incoming.* from incoming
    where not exists (
      select 1 from conversation_events stored
      where stored.conversation_id = conversation and stored.event_id = incoming.event_id
    )
  ),
  inserted as (
    insert into conversation_events (conversation_id, seq, event_id, kind, payload)
    select conversation, last_seq + row_number() over (order by ord), event_id, kind, payload::json from fresh
    returning 1
  )
  update conversations c set
    event_count = c.event_count + (select count(*) from inserted),
    execution_status = coalesce(
      (select status from fresh where status is not null order by ord desc limit 1),
      c.execution_status),
    last_event_at = case when exists (select 1 from inserted) then now() else c.last_event_at end,
    updated_at = now()
  where c.id = conversation
  returning c.event_count - last_seq into appended;

  return query select current_owner, appended;
end
$$;
`;

/**
 * Event payloads are stored as `json`, not `jsonb`: `json` keeps the text exactly as written,
 * including the `\u0000` escapes and lone surrogates (`\ud800`) of arbitrary agent output, and
 * numbers of any size and precision, all of which `jsonb` refuses or normalises.
 *
 * `ingest_events` therefore takes the batch as parallel arrays instead of one `jsonb` document:
 * PostgreSQL cannot take fields out of a JSON document holding `\u0000` as text, while an element of
 * `text[]` goes into the `json` column as it is. Otherwise it does what the previous version did
 * (see Migration20261122010000_ingest_function): one round trip, one transaction, the conversation
 * row locked, first write wins, dense sequence numbers.
 */
export class Migration20261122015000_lossless_payloads extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      alter table conversation_events alter column payload type json using payload::text::json;

      drop function ingest_events(uuid, uuid, jsonb);

      ${INGEST_EVENTS_SQL}
    `);
  }

  override async down(): Promise<void> {
    // Payloads holding what jsonb refuses cannot go back; this fails rather than lose them.
    this.addSql(`
      drop function if exists ingest_events(uuid, uuid, text[], text[], text[], text[]);
      alter table conversation_events alter column payload type jsonb using payload::jsonb;
    `);
    // The previous version of the function, from the migration that created it.
    const previous = new Migration20261122010000_ingest_function(this.driver, this.config);
    await previous.up();
    previous.getQueries().forEach((query) => this.addSql(query));
  }
}
