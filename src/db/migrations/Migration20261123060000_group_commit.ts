import { Migration } from '@mikro-orm/migrations';

/** This version of `ingest_event_batches`; Migration20261123070000_set_based_ingest's `down` restores it. */
export const INGEST_EVENT_BATCHES_SQL = `
create function ingest_event_batches(
  conversations uuid[], owners uuid[], event_counts integer[], event_ids text[], kinds text[],
  statuses text[], payloads text[], delta_counts integer[], deltas text[])
returns table (batch integer, owner_id uuid, stored integer)
language plpgsql as $$
declare
  first_event integer := 1;
  last_event integer;
  first_delta integer := 1;
  last_delta integer;
  outcome record;
begin
  for i in 1 .. coalesce(array_length(conversations, 1), 0) loop
    last_event := first_event + event_counts[i] - 1;
    last_delta := first_delta + delta_counts[i] - 1;
    select * into outcome from ingest_events(
      conversations[i], owners[i],
      coalesce(event_ids[first_event:last_event], '{}'), coalesce(kinds[first_event:last_event], '{}'),
      coalesce(statuses[first_event:last_event], '{}'), coalesce(payloads[first_event:last_event], '{}'),
      coalesce(deltas[first_delta:last_delta], '{}'));
    batch := i;
    owner_id := outcome.owner_id;
    stored := outcome.stored;
    return next;
    first_event := last_event + 1;
    first_delta := last_delta + 1;
  end loop;
end
$$;
`;

/**
 * Group commit for the webhook: `ingest_event_batches` stores several webhook batches in one
 * statement, hence one transaction and one commit (one WAL flush, one turn at the NOTIFY commit
 * lock), for the batches that arrive while another transaction is in flight (see
 * `src/conversations/group-commit.ts`).
 *
 * Each batch goes through `ingest_events` unchanged, in the order given, so its semantics are the
 * single-batch ones: all or nothing per batch, idempotent by event id, dense sequence numbers in
 * arrival order, ownership checked before anything of the batch is written or announced, deltas
 * announced before the batch's events. A batch for another user's conversation writes nothing and
 * comes back with that owner, as from `ingest_events`; the other batches of the group are stored.
 * No savepoints: an unexpected error fails the whole statement, and the application then retries
 * each batch on its own.
 *
 * The batches travel as flat arrays: batch `i` is `conversations[i]`/`owners[i]`, its events are
 * the next `event_counts[i]` elements of `event_ids`/`kinds`/`statuses`/`payloads`, its deltas the
 * next `delta_counts[i]` of `deltas`. Callers order the batches by conversation, so that concurrent
 * groups lock conversations in one order and cannot deadlock.
 */
export class Migration20261123060000_group_commit extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      ${INGEST_EVENT_BATCHES_SQL}
    `);
  }

  override async down(): Promise<void> {
    this.addSql(
      'drop function if exists ingest_event_batches(uuid[], uuid[], integer[], text[], text[], text[], text[], integer[], text[]);',
    );
  }
}
