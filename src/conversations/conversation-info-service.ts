import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../../generated/openapi.ts';
import { ForbiddenError, InvalidInputError } from '../errors.ts';
import type { Principal } from '../identity/authenticator.ts';
import type { Logger } from '../logger.ts';
import { stringifyJson } from '../lossless-json.ts';
import { stripSecretLookingKeys } from '../secret-keys.ts';
import { canonicalUuid } from '../uuid.ts';
import { chargeConversationSpend, usageCostsOf, type ChargeOutcome } from '../spend/spend-ledger.ts';
import * as queries from './queries.ts';
import { readConversationView } from './views.ts';
import { combinedMetricsOf } from './combined-metrics.ts';

export type ConversationInfo = components['schemas']['ConversationInfo'];
type ConversationView = components['schemas']['Conversation'];

/** Told, after the commit, what an info charged (the balance-depleted metric listens). */
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

/** `\u0000` and lone surrogates: what PostgreSQL `text` and `jsonb` cannot hold. */
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

function storable(value: string): boolean {
  UNSTORABLE.lastIndex = 0;
  return !UNSTORABLE.test(value);
}

/** The title as searchable plain text: what `text` cannot hold becomes U+FFFD. */
export function searchableTitle(title: string | null): string | null {
  return title === null ? null : title.replace(UNSTORABLE, '\uFFFD');
}

/** `tags` of a ConversationInfo, as the filter reads them: string values whose key and value PostgreSQL can hold. */
function tagsOf(tags: Record<string, string> | undefined): string | null {
  const entries = Object.entries(tags ?? {}).filter(([key, value]) => typeof value === 'string' && storable(key) && storable(value));
  return entries.length === 0 ? null : JSON.stringify(Object.fromEntries(entries));
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
    // Today's agent-server sends `metrics: null` and the costs in `stats`: the same metrics, derived.
    const derivedMetrics = info.metrics == null ? combinedMetricsOf(info.stats) : null;
    stripSecretLookingKeys(info);
    const infoText = stringifyJson(info);
    const metrics = info.metrics ?? derivedMetrics;
    const metricsText = metrics == null ? null : stringifyJson(metrics);
    const titleText = info.title == null ? null : JSON.stringify(info.title);

    const knex = this.em.getConnection().getKnex();
    const result = await knex.transaction(async (trx) => {
      const { created, ownerId } = await queries.createAndLockConversation(trx, id, principal.orgId);
      if (ownerId !== principal.orgId) throw new ForbiddenError('This conversation belongs to another organization');

      // The agent-server's previous title, to tell a title it changed from one it repeats.
      const previousTitle = await queries.storedInfoTitle(trx, id);
      const applied = await queries.upsertInfo(trx, id, {
        title: titleText,
        metrics: metricsText,
        info: infoText,
        updatedAt,
        forkedFrom: info.forked_from_conversation_id ? canonicalUuid(info.forked_from_conversation_id) : null,
      });
      const spend = await chargeConversationSpend(trx, this.log, {
        conversationId: id,
        ownerId: principal.orgId,
        memberId: principal.userId,
        reportedAt: updatedAt,
        usages,
      });
      if (applied) {
        // A rename holds until the agent-server's own title changes (see renameConversation in the spec).
        await queries.applyInfoToConversation(trx, id, {
          executionStatus: info.execution_status ?? null,
          titleChanged: titleText !== null && previousTitle != null && previousTitle !== titleText,
          titleSearch: searchableTitle(info.title ?? null),
          parentConversationId: info.parent_conversation_id ? canonicalUuid(info.parent_conversation_id) : null,
          tags: tagsOf(info.tags),
        });
      }
      return { created, stale: !applied, spend };
    });
    this.log.debug(
      { conversationId: id, created: result.created, stale: result.stale, chargedMicroUsd: result.spend.chargedMicroUsd.toString() },
      'conversation info received',
    );
    if (result.spend.chargedMicroUsd > 0n) this.observeSpend?.(result.spend);
    const read = await readConversationView(this.em, id);
    return { created: result.created, conversation: read!.view };
  }
}
