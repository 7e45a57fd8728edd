import { Migration } from '@mikro-orm/migrations';

/**
 * A refusal resolves itself (docs/agent-server.md, "Upgrading the agent-server"): `event_ids` keeps the
 * ids of the events a refused body would store (its first 1,000 distinct ones; `StreamingDeltaEvent`s
 * are never stored), written only when a refusal is first recorded. A refusal is resolved once each is
 * in `conversation_events` of its conversation, judged when read through the unique index
 * `conversation_events_event_id_key (conversation_id, event_id)`: accepted batches pay nothing. Null: a
 * body not kept, not a JSON array of objects, or with an event without a string id; that one never
 * resolves by itself. Rows already kept are filled from their bodies the same way. `resolved_at` keeps
 * the answer once found (the ledger's hourly sweep), so a resolved refusal costs reads no probe.
 */
export class Migration20261127190000_refusal_event_ids extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      alter table refused_deliveries add column event_ids text[], add column resolved_at timestamptz;

      create function pg_temp.refused_event_ids(body bytea) returns text[] language plpgsql as $$
      declare
        batch jsonb;
      begin
        batch := convert_from(body, 'UTF8')::jsonb;
        if jsonb_typeof(batch) <> 'array' or exists (
          select 1 from jsonb_array_elements(batch) as event
          where jsonb_typeof(event) <> 'object' or (event->>'kind' is distinct from 'StreamingDeltaEvent' and jsonb_typeof(event->'id') is distinct from 'string')
        ) then
          return null;
        end if;
        return (
          select array_agg(event_id order by first_at) from (
            select event->>'id' as event_id, min(n) as first_at
            from jsonb_array_elements(batch) with ordinality as stored(event, n)
            where event->>'kind' is distinct from 'StreamingDeltaEvent'
            group by 1 order by 2 limit 1000
          ) as kept
        );
      exception when others then
        return null;
      end $$;
      update refused_deliveries set event_ids = pg_temp.refused_event_ids(body) where body is not null;
      drop function pg_temp.refused_event_ids(bytea);
    `);
  }

  override async down(): Promise<void> {
    this.addSql('alter table refused_deliveries drop column event_ids, drop column resolved_at;');
  }
}
