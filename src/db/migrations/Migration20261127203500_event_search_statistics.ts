import { Migration } from '@mikro-orm/migrations';

/**
 * Finer statistics of `event_search.lexemes` (docs/search.md, "Benchmark"): with the default target the
 * planner guessed a word it had not sampled to be in 0.2 % of the rows and, at 5,000,000 events, walked
 * `(owner_id, ordinal desc)` through every row for a word in 5 (7 s) instead of reading the GIN index;
 * with 1,000 it samples 300,000 rows, keeps about twice the common lexemes and guesses ten times fewer.
 */
export class Migration20261127203500_event_search_statistics extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table event_search alter column lexemes set statistics 1000;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table event_search alter column lexemes set statistics -1;`);
  }
}
