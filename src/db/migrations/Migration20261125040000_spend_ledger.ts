import { Migration } from '@mikro-orm/migrations';

/**
 * The spend ledger: what the agents spend is charged against what was bought (`getCredits`).
 *
 * - `spend_usages`: per conversation and LLM usage (`stats.usage_to_metrics.<usage_id>` of the
 *   agent-server's conversation info), the cumulative cost up to which spend has been charged
 *   (`counted_micro_usd`, in the runtime's current counter run), everything charged for it
 *   (`charged_micro_usd`) and the `updated_at` of the newest info that reported it. Written in the
 *   transaction that stores the info, under the conversation's row lock, so that concurrent,
 *   repeated or late posts charge an increase once.
 * - `spend_entries`: one row per charge (an increase), the user's spend history. No foreign key to
 *   `conversations`: money already spent stays charged whatever happens to the conversation.
 * - `spend_totals`: each user's running total of `spend_entries`, updated in the same transaction;
 *   its row lock orders a user's charges, so exactly one charge sees the balance cross zero.
 *
 * Amounts are integer micro-dollars (`bigint`): sums are exact.
 */
export class Migration20261125040000_spend_ledger extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table spend_usages (
        conversation_id uuid not null references conversations (id) on delete cascade,
        usage_id text not null,
        model_name text not null,
        counted_micro_usd bigint not null check (counted_micro_usd >= 0),
        charged_micro_usd bigint not null check (charged_micro_usd >= 0),
        reported_at timestamptz,
        primary key (conversation_id, usage_id)
      );

      create table spend_entries (
        id bigint generated always as identity primary key,
        owner_id uuid not null references users (id) on delete cascade,
        conversation_id uuid not null,
        usage_id text not null,
        model_name text not null,
        amount_micro_usd bigint not null check (amount_micro_usd > 0),
        charged_at timestamptz not null default now()
      );
      create index spend_entries_owner_charged_idx on spend_entries (owner_id, charged_at) include (amount_micro_usd);

      create table spend_totals (
        owner_id uuid primary key references users (id) on delete cascade,
        spent_micro_usd bigint not null check (spent_micro_usd >= 0)
      );
    `);
  }

  override async down(): Promise<void> {
    this.addSql('drop table spend_totals; drop table spend_entries; drop table spend_usages;');
  }
}
