import type { MikroORM } from '@mikro-orm/postgresql';
import type { Config } from './config.ts';
import type { Logger } from './logger.ts';
import { poolStatsOf } from './db/pool-stats.ts';
import { AuditLogService } from './audit/audit-service.ts';
import { createBillingService } from './billing/billing-service.ts';
import { ConversationInfoService } from './conversations/conversation-info-service.ts';
import { ConversationService } from './conversations/conversation-service.ts';
import { RefusalService } from './refusals/refusal-service.ts';
import { Authenticator } from './identity/authenticator.ts';
import { IdentityService } from './identity/identity-service.ts';
import { OrganizationAdministration } from './organizations/organization-administration.ts';
import { LiveStreams } from './live/live-streams.ts';
import { StreamTickets } from './live/stream-tickets.ts';
import { Metrics } from './observability/metrics.ts';
import { OrganizationService } from './organizations/organization-service.ts';
import { DeliveryWorker } from './outbound/delivery-worker.ts';
import { IngestPressure } from './outbound/ingest-pressure.ts';
import { SharedIngestPressure } from './outbound/shared-pressure.ts';
import { PgBossOutboundQueue } from './outbound/outbound-queue.ts';
import { outboundQueueDepth } from './outbound/queries.ts';
import { WebhookEndpointService } from './outbound/webhook-endpoint-service.ts';
import { ShareService } from './sharing/share-service.ts';
import { SpendService } from './spend/spend-service.ts';
import { BudgetService } from './budgets/budget-service.ts';
import { UsageService } from './usage/usage-service.ts';
import { SearchIndexer } from './search/indexer.ts';
import { SearchService } from './search/search-service.ts';
import type { ChargeOutcome } from './spend/spend-ledger.ts';
import { VerifiedModelService } from './verified-models/verified-model-service.ts';
import { createWorkspaceService, secretBoxFor } from './workspaces/setup.ts';
import { IdempotencyService } from './idempotency/idempotency-service.ts';
import { RateLimiter } from './rate-limits/rate-limiter.ts';
import { RateLimitInstances } from './rate-limits/instances.ts';

/** What the app is built from; tests pass their own. */
export interface AppDeps {
  readonly config: Config;
  readonly logger: Logger;
  readonly orm: MikroORM;
  readonly database: { isReachable(): Promise<boolean>; readonly listenUrl?: string };
}

/** Builds every service once, from the app's dependencies; none of them knows HTTP. */
export function buildServices({ config, logger, orm, database }: AppDeps) {
  const metrics = new Metrics(() => poolStatsOf(orm));
  metrics.trackOutboundQueueDepth(() => outboundQueueDepth(orm.em));
  const authenticator = new Authenticator(orm.em, config.credentialCacheTtlMs);
  const conversations = new ConversationService(orm.em, logger, config.ingestGroup);
  // One keyring for every service that seals secrets (workspaces, webhook endpoints): loaded and warned about once.
  const secretBox = secretBoxFor(config, logger);
  // LISTEN needs a session of its own: straight to PostgreSQL, not through a transaction pooler.
  const listenUrl = database.listenUrl ?? orm.config.get('clientUrl')!;
  const ingestPressure = new IngestPressure(config.outboundWebhooks.yieldAboveBatchesPerSecond);
  // Delivery and indexing yield to every instance's webhook, this one's included.
  const sharedPressure = new SharedIngestPressure(orm.em, ingestPressure, logger);
  metrics.trackIngestPressure(ingestPressure, sharedPressure);
  const outboundQueue = new PgBossOutboundQueue(orm.em.getConnection().getKnex(), logger);
  const rateLimiter = new RateLimiter(config.rateLimits);
  return {
    database,
    metrics,
    authenticator,
    conversations,
    ingestPressure,
    // Built here, started by main.ts (or a test): the exchange of the webhook's pressure among instances.
    sharedPressure,
    refusals: new RefusalService(orm.em),
    shares: new ShareService(orm.em, conversations, { enabled: config.sharingEnabled, publicBaseUrl: config.billing.publicBaseUrl }),
    search: new SearchService(orm.em),
    searchIndexer: new SearchIndexer(orm.em, config.search, logger, metrics.outageObserver, sharedPressure),
    identity: new IdentityService(orm.em),
    organizations: new OrganizationService(orm.em, config.invitationTtlDays),
    conversationInfos: new ConversationInfoService(orm.em, logger, (outcome) => observeSpend(outcome, metrics, logger)),
    spend: new SpendService(orm.em),
    budgets: new BudgetService(orm.em),
    usage: new UsageService(orm.em),
    verifiedModels: new VerifiedModelService(orm.em),
    audit: new AuditLogService(orm.em),
    organizationAdministration: new OrganizationAdministration(orm.em),
    workspaces: createWorkspaceService(config, orm.em, secretBox),
    billing: createBillingService(orm.em, config.billing, logger),
    liveStreams: new LiveStreams(listenUrl, conversations, {
      bufferBytes: config.liveStreamBufferBytes,
      stallMs: config.liveStreamStallMs,
      heartbeatMs: config.liveStreamHeartbeatMs,
      maxPerUser: config.liveStreamMaxPerUser,
      credentialCheckMs: config.liveStreamCredentialCheckMs,
    }, logger, (callers) => authenticator.stillValid(callers)),
    streamTickets: new StreamTickets(orm.em, config.liveStreamTicketTtlMs),
    webhookEndpoints: new WebhookEndpointService(orm.em, secretBox, config.outboundWebhooks, outboundQueue),
    // Built here, started by main.ts (or a test): the app's only background consumer.
    deliveryWorker: new DeliveryWorker(orm.em, outboundQueue, listenUrl, secretBox, config.outboundWebhooks, logger, {
      attempt: (type, outcome, seconds) => metrics.recordOutboundAttempt(type, outcome, seconds),
    }, sharedPressure, metrics.outageObserver),
    rateLimiter,
    // Built here, started by main.ts (or a test): the heartbeat that splits the limits among instances.
    rateLimitInstances: new RateLimitInstances(orm.em, rateLimiter, logger),
    idempotency: new IdempotencyService(orm.em, secretBox),
  };
}

export type Services = ReturnType<typeof buildServices>;

function observeSpend(outcome: ChargeOutcome, metrics: Metrics, logger: Logger): void {
  metrics.recordSpend(outcome.chargedMicroUsd, outcome.depleted !== undefined);
  if (!outcome.depleted) return;
  const { orgId, conversationId, balanceMicroUsd } = outcome.depleted;
  // The `billing.balance_depleted` outbound message was stored with the charge (chargeConversationSpend).
  logger.warn({ orgId, conversationId, balanceMicroUsd: balanceMicroUsd.toString() }, 'balance depleted: spend took it below zero');
}
