import { Migration } from '@mikro-orm/migrations';

/**
 * Usage per member of an organization (`getUsage group_by=member`), kept like the model rollup
 * (Migration20261127136000_usage_rollups): `usage_member_days` holds a member's sums per UTC day in the
 * bucket of the conversation's previous usage day by that member, and `usage_conversation_members` the last
 * two of those days. A member is the user whose session API key posted the usage. Before organizations every
 * owner was one user's personal organization, with the user's own id: the backfill gives it to that user.
 */
export class Migration20261127211000_usage_members extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table usage_conversation_members (
        conversation_id uuid not null,
        member_id uuid not null,
        owner_id uuid not null references organizations (id) on delete cascade,
        last_day date not null,
        prev_day date not null,
        primary key (conversation_id, member_id)
      );

      create table usage_member_days (
        owner_id uuid not null references organizations (id) on delete cascade,
        day date not null,
        member_id uuid not null,
        prev_day date not null,
        conversations bigint not null check (conversations >= 0),
        cost_micro_usd bigint not null check (cost_micro_usd >= 0),
        tokens_in bigint not null check (tokens_in >= 0),
        tokens_out bigint not null check (tokens_out >= 0),
        llm_calls bigint not null check (llm_calls >= 0),
        primary key (owner_id, day, member_id, prev_day)
      );
    `);
    this.addSql(usageMemberRollupsBackfill());
  }

  override async down(): Promise<void> {
    this.addSql(`drop table usage_member_days, usage_conversation_members;`);
  }
}

/**
 * Rebuilds the member rollups from the conversation rollups, each owner's usage given to the user with the
 * owner's id (a personal organization's): the migration's backfill, and what a test or bench runs after
 * `usageRollupsBackfill`, which knows no members.
 */
export function usageMemberRollupsBackfill(): string {
  return `
    truncate usage_member_days, usage_conversation_members;
    insert into usage_member_days (owner_id, day, member_id, prev_day, conversations, cost_micro_usd, tokens_in, tokens_out, llm_calls)
    select owner_id, day, owner_id, prev_day, conversations, cost_micro_usd, tokens_in, tokens_out, llm_calls from usage_owner_days;
    insert into usage_conversation_members (conversation_id, member_id, owner_id, last_day, prev_day)
    select conversation_id, owner_id, owner_id, last_day, prev_day from usage_conversations;
  `;
}
