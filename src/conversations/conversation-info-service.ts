import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../../generated/openapi.ts';
import { ForbiddenError, InvalidInputError } from '../errors.ts';
import type { Principal } from '../identity/authenticator.ts';
import type { Logger } from '../logger.ts';
import { parseJson, stringifyJson } from '../lossless-json.ts';
import { stripSecretLookingKeys } from '../secret-keys.ts';
import { canonicalUuid } from '../uuid.ts';
import { chargeConversationSpend, usageCostsOf, type ChargeOutcome } from '../spend/spend-ledger.ts';
import { toConversationView } from './mapper.ts';
import type { Conversation } from './entities.ts';

export type ConversationInfo = components['schemas']['ConversationInfo'];
type ConversationView = components['schemas']['Conversation'];
type MetricsSnapshot = components['schemas']['MetricsSnapshot'];

/** What a conversation's view shows from the agent-server's latest conversation info. */
export interface ConversationInfoSummary {
  title: string | null;
  metrics: MetricsSnapshot | null;
  /** What has been charged for the conversation's LLM usage (the spend ledger), in micro-dollars. */
  costMicroUsd: bigint;
}

/** Told, after the commit, what an info charged (the balance-depleted metric and webhook listen). */
export type SpendObserver = (outcome: ChargeOutcome) => void;

/** The instants an ISO 8601 string with a four-digit year can name, and PostgreSQL can hold. */
const EARLIEST = Date.parse('0001-01-01T00:00:00Z');
const LATEST = Date.parse('9999-12-31T23:59:59.999Z');

/**
 * `updated_at` as an instant PostgreSQL accepts. Without an offset it is UTC (pydantic writes naive
 * datetimes so). The schema checks the form; an instant outside years 1–9999 (once the offset is
 * applied) is a 422.
 */
function updatedAtOf(timestamp: string | undefined): string | null {
  if (timestamp === undefined) return null;
  const instant = Date.parse(/(Z|[+-]\d{2}:?\d{2})$/.test(timestamp) ? timestamp : `${timestamp}Z`);
  if (Number.isNaN(instant) || instant < EARLIEST || instant > LATEST) {
    throw new InvalidInputError('Input should be a valid datetime', ['body', 'updated_at'], 'datetime_from_date_parsing', timestamp);
  }
  return new Date(instant).toISOString();
}

interface ConversationRow {
  id: string;
  owner_id: string;
  execution_status: string | null;
  event_count: number;
  created_at: Date;
  updated_at: Date;
  last_event_at: Date | null;
  title: string | null;
  metrics: string | null;
  cost_micro_usd: string;
}

/** The agent-server's conversation info (POST /api/v1/webhooks/conversations): stored, and shown on the conversation. */
export class ConversationInfoService {
  constructor(
    private readonly em: EntityManager,
    private readonly log: Logger,
    private readonly observeSpend?: SpendObserver,
  ) {}

  /**
   * Stores `info` for `principal`: creates the conversation when it is new (owned by the caller),
   * refuses another user's, and keeps the latest info by the agent-server's `updated_at`. The info is
   * stored minus its secret-looking keys and never logged. The increase of each LLM usage's cost is
   * charged to the owner in the same transaction (`chargeConversationSpend`).
   */
  async receive(principal: Principal, info: ConversationInfo): Promise<{ created: boolean; conversation: ConversationView }> {
    const id = canonicalUuid(info.id);
    const updatedAt = updatedAtOf(info.updated_at);
    // Before the secret-looking keys go: a usage id is a key too, and its spend is charged whatever its name.
    const usages = usageCostsOf(info);
    stripSecretLookingKeys(info);
    const infoText = stringifyJson(info);
    const metricsText = info.metrics == null ? null : stringifyJson(info.metrics);
    const titleText = info.title == null ? null : JSON.stringify(info.title);

    const knex = this.em.getConnection().getKnex();
    const result = await knex.transaction(async (trx) => {
      const inserted = await trx.raw(
        `insert into conversations (id, owner_id, created_at, updated_at)
         values (?, ?, date_trunc('milliseconds', now()), now())
         on conflict (id) do nothing returning id`,
        [id, principal.userId],
      );
      const created = inserted.rows.length > 0;
      const [owner] = (await trx.raw('select owner_id from conversations where id = ? for update', [id])).rows as { owner_id: string }[];
      if (owner!.owner_id !== principal.userId) throw new ForbiddenError('This conversation belongs to another user');

      const applied = await trx.raw(
        `insert into conversation_infos as stored (conversation_id, title, metrics, info, info_updated_at)
         values (?, ?::json, ?::json, ?::json, ?::timestamptz)
         on conflict (conversation_id) do update set
           title = excluded.title, metrics = excluded.metrics, info = excluded.info,
           info_updated_at = excluded.info_updated_at, received_at = now()
         where stored.info_updated_at is null or excluded.info_updated_at is null
           or excluded.info_updated_at >= stored.info_updated_at
         returning 1`,
        [id, titleText, metricsText, infoText, updatedAt],
      );
      const spend = await chargeConversationSpend(trx, this.log, { conversationId: id, ownerId: principal.userId, reportedAt: updatedAt, usages });
      if (applied.rows.length > 0) {
        await trx.raw(
          `update conversations set execution_status = coalesce(?, execution_status), updated_at = now() where id = ?`,
          [info.execution_status ?? null, id],
        );
      }
      const [row] = (
        await trx.raw(
          `select c.*, i.title::text as title, i.metrics::text as metrics,
             (select coalesce(sum(charged_micro_usd), 0) from spend_usages s where s.conversation_id = c.id)::text as cost_micro_usd
           from conversations c left join conversation_infos i on i.conversation_id = c.id where c.id = ?`,
          [id],
        )
      ).rows as ConversationRow[];
      return { created, stale: applied.rows.length === 0, row: row!, spend };
    });
    this.log.debug(
      { conversationId: id, created: result.created, stale: result.stale, chargedMicroUsd: result.spend.chargedMicroUsd.toString() },
      'conversation info received',
    );
    if (result.spend.chargedMicroUsd > 0n) this.observeSpend?.(result.spend);
    return { created: result.created, conversation: toConversationView(conversationOf(result.row), summaryOf(result.row)) };
  }
}

function conversationOf(row: ConversationRow): Conversation {
  return {
    id: row.id,
    owner: { id: row.owner_id } as Conversation['owner'],
    executionStatus: row.execution_status,
    eventCount: row.event_count,
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
    lastEventAt: row.last_event_at ? new Date(row.last_event_at) : null,
  };
}

function summaryOf(row: { title: string | null; metrics: string | null; cost_micro_usd: string }): ConversationInfoSummary {
  return {
    title: row.title === null ? null : (parseJson(row.title) as string | null),
    metrics: row.metrics === null ? null : (parseJson(row.metrics) as MetricsSnapshot),
    costMicroUsd: BigInt(row.cost_micro_usd),
  };
}

/** Title, latest metrics and charged cost of each of `conversationIds` that has conversation info. */
export async function conversationInfoSummaries(
  em: EntityManager,
  conversationIds: string[],
): Promise<Map<string, ConversationInfoSummary>> {
  const summaries = new Map<string, ConversationInfoSummary>();
  if (conversationIds.length === 0) return summaries;
  const rows = await em
    .getConnection()
    .execute<{ conversation_id: string; title: string | null; metrics: string | null; cost_micro_usd: string }[]>(
      `select conversation_id, title::text as title, metrics::text as metrics,
         (select coalesce(sum(charged_micro_usd), 0) from spend_usages s where s.conversation_id = i.conversation_id)::text as cost_micro_usd
       from conversation_infos i
       where conversation_id in (${conversationIds.map(() => '?').join(', ')})`,
      conversationIds,
    );
  for (const row of rows) summaries.set(row.conversation_id, summaryOf(row));
  return summaries;
}
