import { Migration } from '@mikro-orm/migrations';

/**
 * Usage rollups: `getUsage` over 90 days of 50,000 conversations without aggregating 78,000 rows
 * or hashing 50,000 groups (docs/performance.md, "Usage").
 *
 * - `usage_owner_days` / `usage_model_days`: the owner's sums per UTC day (and model), split by
 *   `prev_day`, the conversation's (the conversation-and-model's) usage day before that one
 *   (`-infinity` for none). `conversations` counts the conversations that used something that day,
 *   each once, in the bucket of its previous day; so a range's distinct conversations are the sum of
 *   the buckets with `prev_day < since`: a filter over about a hundred rows, no `count(distinct …)`.
 * - `usage_conversations`: each conversation's running totals, first and last usage day and the day
 *   before its last; the top conversations of a range are read in cost order from an index, those
 *   that used something outside the range (their span crosses `since` or `until`, a GiST probe) are
 *   summed from `usage_daily`.
 * - `usage_conversation_models`: the last usage day of each conversation and model and the one before,
 *   which pick the model buckets.
 * - `usage_daily`'s primary key becomes (conversation, day, model): no read scans it by owner any more,
 *   the straddling conversations are looked up by conversation, and without the included sums its
 *   updates can be HOT.
 *
 * Written by the ConversationInfo post's one usage statement (src/spend/queries.ts), in the charge's
 * transaction; existing data is rebuilt from `usage_daily` (`usageRollupsBackfill`).
 */
export class Migration20261127136000_usage_rollups extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create extension if not exists btree_gist;

      alter table usage_daily drop constraint usage_daily_pkey;
      alter table usage_daily add primary key (conversation_id, day, model_name);
      create index usage_daily_owner on usage_daily (owner_id);

      create table usage_conversations (
        conversation_id uuid primary key,
        owner_id uuid not null references users (id) on delete cascade,
        first_day date not null,
        last_day date not null,
        prev_day date not null,
        cost_micro_usd bigint not null check (cost_micro_usd >= 0),
        tokens_in bigint not null check (tokens_in >= 0),
        tokens_out bigint not null check (tokens_out >= 0),
        llm_calls bigint not null check (llm_calls >= 0)
      );
      create index usage_conversations_top on usage_conversations (owner_id, cost_micro_usd desc, (tokens_in + tokens_out) desc, conversation_id);
      create index usage_conversations_span on usage_conversations using gist (owner_id, daterange(first_day, last_day, '[]'));

      create table usage_conversation_models (
        conversation_id uuid not null,
        model_name text not null,
        owner_id uuid not null references users (id) on delete cascade,
        last_day date not null,
        prev_day date not null,
        primary key (conversation_id, model_name)
      );

      create table usage_owner_days (
        owner_id uuid not null references users (id) on delete cascade,
        day date not null,
        prev_day date not null,
        conversations bigint not null check (conversations >= 0),
        cost_micro_usd bigint not null check (cost_micro_usd >= 0),
        tokens_in bigint not null check (tokens_in >= 0),
        tokens_out bigint not null check (tokens_out >= 0),
        llm_calls bigint not null check (llm_calls >= 0),
        primary key (owner_id, day, prev_day)
      );

      create table usage_model_days (
        owner_id uuid not null references users (id) on delete cascade,
        day date not null,
        model_name text not null,
        prev_day date not null,
        conversations bigint not null check (conversations >= 0),
        cost_micro_usd bigint not null check (cost_micro_usd >= 0),
        tokens_in bigint not null check (tokens_in >= 0),
        tokens_out bigint not null check (tokens_out >= 0),
        llm_calls bigint not null check (llm_calls >= 0),
        primary key (owner_id, day, model_name, prev_day)
      );
    `);
    this.addSql(usageRollupsBackfill());
  }

  override async down(): Promise<void> {
    this.addSql(`
      drop table usage_model_days, usage_owner_days, usage_conversation_models, usage_conversations;
      drop index usage_daily_owner;
      alter table usage_daily drop constraint usage_daily_pkey;
      alter table usage_daily add primary key (owner_id, day, conversation_id, model_name) include (cost_micro_usd, tokens_in, tokens_out, llm_calls);
    `);
  }
}

/**
 * Rebuilds the four rollups from `usage_daily` (all of them: the migration's backfill, and what a test
 * or the bench runs after writing `usage_daily` directly). Each conversation-day's bucket is the
 * conversation's usage day before it, as the post's statement picks it.
 */
export function usageRollupsBackfill(): string {
  return `
    truncate usage_model_days, usage_owner_days, usage_conversation_models, usage_conversations;

    insert into usage_model_days (owner_id, day, model_name, prev_day, conversations, cost_micro_usd, tokens_in, tokens_out, llm_calls)
    select owner_id, day, model_name, prev_day, count(*), sum(cost_micro_usd), sum(tokens_in), sum(tokens_out), sum(llm_calls)
    from (
      select d.*, lag(day, 1, '-infinity'::date) over (partition by conversation_id, model_name order by day) as prev_day from usage_daily d
    ) model_days
    group by 1, 2, 3, 4;

    insert into usage_conversation_models (conversation_id, model_name, owner_id, last_day, prev_day)
    select conversation_id, model_name, min(owner_id::text)::uuid, max(day), coalesce(max(day) filter (where not last), '-infinity')
    from (
      select conversation_id, model_name, owner_id, day, row_number() over (partition by conversation_id, model_name order by day desc) = 1 as last from usage_daily
    ) model_days
    group by 1, 2;

    create temporary table usage_conversation_days as
    select owner_id, conversation_id, day, lag(day, 1, '-infinity'::date) over (partition by conversation_id order by day) as prev_day,
      sum(cost_micro_usd) as cost, sum(tokens_in) as tokens_in, sum(tokens_out) as tokens_out, sum(llm_calls) as llm_calls
    from usage_daily group by owner_id, conversation_id, day;

    insert into usage_owner_days (owner_id, day, prev_day, conversations, cost_micro_usd, tokens_in, tokens_out, llm_calls)
    select owner_id, day, prev_day, count(*), sum(cost), sum(tokens_in), sum(tokens_out), sum(llm_calls)
    from usage_conversation_days group by 1, 2, 3;

    insert into usage_conversations (conversation_id, owner_id, first_day, last_day, prev_day, cost_micro_usd, tokens_in, tokens_out, llm_calls)
    select conversation_id, min(owner_id::text)::uuid, min(day), max(day), (array_agg(prev_day order by day desc))[1],
      sum(cost), sum(tokens_in), sum(tokens_out), sum(llm_calls)
    from usage_conversation_days group by 1;

    drop table usage_conversation_days;
  `;
}
