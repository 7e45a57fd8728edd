import { Migration } from '@mikro-orm/migrations';

/**
 * The agent-server's latest `ConversationInfo` per conversation (POST /api/v1/webhooks/conversations).
 *
 * A table of its own rather than columns of `conversations`: the webhook's hot path updates
 * `conversations` once per delivery (a HOT update thanks to its fillfactor), and a multi-kilobyte
 * info document on that row would make every such update copy it. `info` is `json`, not `jsonb`, for
 * the same reason as event payloads (Migration20261122015000_lossless_payloads): it is kept as the
 * text that was sent (minus secret-looking keys), `\u0000`, lone surrogates and large numbers
 * included. `title` and `metrics` are what `GET /api/v1/conversations/{id}` shows, kept as JSON text
 * too (a title is model output: a `text` column refuses `\u0000`); `info_updated_at`
 * is the agent-server's own `updated_at`, so that a late retry of an older post cannot undo a newer one.
 */
export class Migration20261123040000_conversation_info extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table conversation_infos (
        conversation_id uuid primary key references conversations (id) on delete cascade,
        title json,
        metrics json,
        info json not null,
        info_updated_at timestamptz,
        received_at timestamptz not null default now()
      );
    `);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists conversation_infos;');
  }
}
