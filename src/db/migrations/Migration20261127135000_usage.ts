import { Migration } from '@mikro-orm/migrations';

/**
 * Usage (`getUsage`): cost, tokens and LLM calls per user, UTC day, conversation and model.
 *
 * - `spend_usages` also counts each usage's prompt and completion tokens and its LLM calls (the
 *   length of `token_usages`), so that, like its cost, only their increase is counted once.
 * - `usage_daily` holds the increases summed per (owner, UTC day, conversation, model), written in
 *   the transaction that charges the info, beside `spend_entries`. Its cost column is the day's
 *   `spend_entries` to the micro-dollar (same transaction, same `now()`). It exists because a user's
 *   entries are one per charging post (hundreds of thousands for 50,000 conversations); this table
 *   has about one row per conversation and day, and its primary key serves every grouping's range
 *   scan (docs/billing.md, "Usage").
 *
 * Existing data: costs come from `spend_entries` exactly; tokens and calls reported so far are
 * taken from each conversation's stored info and counted on the day of its latest report, and the
 * new counters start from them, so the next post counts only what it adds.
 */
export class Migration20261127135000_usage extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      alter table spend_usages
        add column counted_tokens_in bigint not null default 0 check (counted_tokens_in >= 0),
        add column counted_tokens_out bigint not null default 0 check (counted_tokens_out >= 0),
        add column counted_llm_calls bigint not null default 0 check (counted_llm_calls >= 0);

      create table usage_daily (
        owner_id uuid not null references users (id) on delete cascade,
        day date not null,
        conversation_id uuid not null,
        model_name text not null,
        cost_micro_usd bigint not null check (cost_micro_usd >= 0),
        tokens_in bigint not null check (tokens_in >= 0),
        tokens_out bigint not null check (tokens_out >= 0),
        llm_calls bigint not null check (llm_calls >= 0),
        primary key (owner_id, day, conversation_id, model_name) include (cost_micro_usd, tokens_in, tokens_out, llm_calls)
      );

      insert into usage_daily (owner_id, day, conversation_id, model_name, cost_micro_usd, tokens_in, tokens_out, llm_calls)
      select owner_id, (charged_at at time zone 'UTC')::date, conversation_id, model_name, sum(amount_micro_usd), 0, 0, 0
      from spend_entries group by 1, 2, 3, 4;

      with reported as (
        select u.conversation_id, u.usage_id, c.owner_id, u.model_name,
          ((coalesce(u.reported_at, i.received_at)) at time zone 'UTC')::date as day,
          i.info -> 'stats' -> 'usage_to_metrics' -> u.usage_id as metrics
        from spend_usages u
        join conversations c on c.id = u.conversation_id
        join conversation_infos i on i.conversation_id = u.conversation_id
      ), counted as (
        select conversation_id, usage_id, owner_id, model_name, day,
          case when json_typeof(metrics -> 'accumulated_token_usage' -> 'prompt_tokens') = 'number'
            then least(greatest((metrics -> 'accumulated_token_usage' ->> 'prompt_tokens')::numeric, 0), 9007199254740991)::bigint else 0 end as tokens_in,
          case when json_typeof(metrics -> 'accumulated_token_usage' -> 'completion_tokens') = 'number'
            then least(greatest((metrics -> 'accumulated_token_usage' ->> 'completion_tokens')::numeric, 0), 9007199254740991)::bigint else 0 end as tokens_out,
          case when json_typeof(metrics -> 'token_usages') = 'array' then json_array_length(metrics -> 'token_usages') else 0 end as llm_calls
        from reported where json_typeof(metrics) = 'object'
      ), updated as (
        update spend_usages u set counted_tokens_in = c.tokens_in, counted_tokens_out = c.tokens_out, counted_llm_calls = c.llm_calls
        from counted c where u.conversation_id = c.conversation_id and u.usage_id = c.usage_id
        returning c.owner_id, c.day, c.conversation_id, c.model_name, c.tokens_in, c.tokens_out, c.llm_calls
      )
      insert into usage_daily as d (owner_id, day, conversation_id, model_name, cost_micro_usd, tokens_in, tokens_out, llm_calls)
      select owner_id, day, conversation_id, model_name, 0, sum(tokens_in), sum(tokens_out), sum(llm_calls)
      from updated group by 1, 2, 3, 4
      having sum(tokens_in) + sum(tokens_out) + sum(llm_calls) > 0
      on conflict (owner_id, day, conversation_id, model_name) do update set
        tokens_in = d.tokens_in + excluded.tokens_in, tokens_out = d.tokens_out + excluded.tokens_out, llm_calls = d.llm_calls + excluded.llm_calls;
    `);
  }

  override async down(): Promise<void> {
    this.addSql(`
      drop table usage_daily;
      alter table spend_usages drop column counted_tokens_in, drop column counted_tokens_out, drop column counted_llm_calls;
    `);
  }
}
