import { Migration } from '@mikro-orm/migrations';

/**
 * The delivery worker now runs only `{message_id, endpoint_id?, attempt}` jobs. Jobs queued by versions
 * before Migration20261125080000_webhook_outbox that are still waiting are converted, so that none is
 * lost (docs/outbound-webhooks.md, "Upgrading"): a `{message_ids, attempt}` job becomes one job per
 * message, with the same attempt, start time and retry count; a `{fanout}` job is removed, since the
 * outbox poll fans its messages out. On a new database pg-boss's schema does not exist yet: nothing to do.
 */
export class Migration20261127020000_retire_legacy_delivery_jobs extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      do $$
      begin
        if to_regclass('pgboss.job') is null then
          return;
        end if;
        -- Dynamic: the statement names pg-boss's table, which is checked above, not when the block is compiled.
        execute $legacy$
          with legacy as (
            delete from pgboss.job
            where name = 'webhook-delivery' and state in ('created', 'retry', 'active')
              and (data->'fanout' is not null or data->'message_ids' is not null)
            returning *
          )
          insert into pgboss.job
          select (jsonb_populate_record(null::pgboss.job, to_jsonb(l) || jsonb_build_object(
            'id', gen_random_uuid(),
            'state', 'created',
            'started_on', null,
            'heartbeat_on', null,
            'data', jsonb_strip_nulls(jsonb_build_object(
              'message_id', m.id, 'endpoint_id', l.data->'endpoint_id', 'attempt', coalesce(l.data->'attempt', '1'::jsonb)))
          ))).*
          from legacy l cross join lateral jsonb_array_elements_text(l.data->'message_ids') as m(id)
        $legacy$;
      end
      $$;
    `);
  }
}
