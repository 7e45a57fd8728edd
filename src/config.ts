import path from 'node:path';
import { KeyringError, parseKeyring, type SecretKey } from './crypto/secret-box.ts';

/**
 * Bounds on waiting for the database, so that an unreachable or stalled database gives a 503 within
 * a known time instead of a hang (see `src/db/errors.ts`).
 */
export interface DatabaseTimeouts {
  /** Waiting for a free pool connection, including opening a new one (`DB_ACQUIRE_TIMEOUT_MS`). */
  readonly acquireTimeoutMs: number;
  /** PostgreSQL `statement_timeout` of every connection (`DB_QUERY_TIMEOUT_MS`). */
  readonly queryTimeoutMs: number;
  /** Longest `/readyz` waits for the database before it answers 503 (`READINESS_TIMEOUT_MS`). */
  readonly readinessTimeoutMs: number;
}

/** The timeouts when the environment does not set them. */
export const DEFAULT_DATABASE_TIMEOUTS: DatabaseTimeouts = { acquireTimeoutMs: 5_000, queryTimeoutMs: 30_000, readinessTimeoutMs: 1_000 };

/** Where the database comes from: a URL the operator gives us, or a PostgreSQL we run ourselves. */
export type DatabaseConfig = (
  | {
      readonly kind: 'url';
      readonly url: string;
      /**
       * `DATABASE_LISTEN_URL`: a direct (session) connection to PostgreSQL, never through a
       * transaction-pooling PgBouncer: LISTEN, session advisory locks, job queues. Defaults to `url`.
       */
      readonly listenUrl: string;
    }
  | { readonly kind: 'embedded'; readonly dataDir: string; readonly port: number }
) & {
  /** Connections in the pool: concurrent webhook transactions, each waiting on its commit's flush. */
  readonly poolSize: number;
  readonly timeouts: DatabaseTimeouts;
  /**
   * `DATABASE_POOL_MODE`: `session` when `DATABASE_URL` reaches PostgreSQL (or a session-pooling
   * PgBouncer), `transaction` behind a transaction-pooling PgBouncer: then no named prepared
   * statements and no session settings in the startup packet (see docs/scaling.md).
   */
  readonly poolMode: 'session' | 'transaction';
  /** `DATABASE_APPLICATION_NAME`: `application_name` of the pool's connections (pg_stat_activity). */
  readonly applicationName: string;
};

export interface Config {
  readonly port: number;
  readonly host: string;
  readonly database: DatabaseConfig;
  readonly dataDir: string;
  readonly logLevel: string;
  /**
   * `RESPONSE_VALIDATION=log`: every response is checked against the spec and each one it does not
   * describe is reported on stderr (`src/api/response-contract.ts`); for tests and staging, off by default.
   */
  readonly responseValidation: 'off' | 'log';
  /** Largest accepted request body, in bytes; larger bodies get 413. */
  readonly bodyLimitBytes: number;
  /** `WEBHOOK_SINGLE_EVENT_LIMIT_BYTES`: a webhook batch holding exactly one event may be this large (docs/agent-server.md). */
  readonly webhookSingleEventLimitBytes: number;
  /** `REQUEST_BODY_BUDGET_BYTES`: request bodies this instance reads at once, in total; past it → 503 with Retry-After. */
  readonly requestBodyBudgetBytes: number;
  /** `REFUSED_DELIVERY_RETENTION_DAYS`: a refused webhook batch not seen again for this long leaves the ledger. */
  readonly refusedDeliveryRetentionDays: number;
  /** Upper bound on the 422 error list, so a huge bad batch cannot produce a huge response. */
  readonly maxValidationErrors: number;
  /**
   * `WEBHOOK_EVENT_COMPATIBILITY`: `strict` refuses (422) events of kinds, or with properties, the
   * spec does not know; `accept-unknown` stores them as sent and flags them (docs/agent-server.md).
   */
  readonly webhookEventCompatibility: WebhookEventCompatibility;
  /** How long a verified credential is trusted without asking the database again. */
  readonly credentialCacheTtlMs: number;
  /** How long an invitation to an organization can be accepted (`INVITATION_TTL_DAYS`). */
  readonly invitationTtlDays: number;
  /** Time given to in-flight requests on SIGTERM/SIGINT before the process gives up on them. */
  readonly shutdownGraceMs: number;

  // Issue-tracker workspaces
  /** `SECRETS_ENCRYPTION_KEYS`: first key encrypts, all decrypt; unset → the key file in `dataDir`. */
  readonly secretsEncryptionKeys: readonly SecretKey[] | undefined;
  /** `ISSUE_TRACKER_BASE_URL` (may hold `{workspace}`); unset → registration does not call a tracker. */
  readonly issueTrackerBaseUrl: string | undefined;
  /** Time given to each call to the issue tracker before registration answers 503. */
  readonly issueTrackerTimeoutMs: number;

  // Billing (issue 8): checkout sessions through Stripe or the built-in local checkout.
  readonly billing: BillingConfig;

  // Webhook group commit (see src/conversations/group-commit.ts)
  /** Bounds of the transactions that store webhook batches together. */
  readonly ingestGroup: IngestGroupConfig;

  // Operations (metrics)
  /** Bearer token `/metrics` requires; undefined leaves `/metrics` open. */
  readonly metricsToken: string | undefined;

  // Live conversation streams (src/live/)
  /** Bytes a live subscriber may have waiting to be sent (and again queued) before it is disconnected as too slow. */
  readonly liveStreamBufferBytes: number;
  /** A live subscriber whose full buffer does not drain for this long is disconnected as too slow. */
  readonly liveStreamStallMs: number;
  /** Interval of the SSE comment lines that keep idle live streams alive through proxies. */
  readonly liveStreamHeartbeatMs: number;
  /** Live streams one user may hold open at once on one server instance; more get 429. */
  readonly liveStreamMaxPerUser: number;
  /** How long a stream ticket (for browsers' EventSource) stays valid; it is single-use. */
  readonly liveStreamTicketTtlMs: number;
  /**
   * How often open live streams check their credential again (`LIVE_STREAM_CREDENTIAL_CHECK_MS`;
   * default the credential cache's TTL, or 1 s without a cache): a revoked key's or a suspended
   * user's streams end within this time.
   */
  readonly liveStreamCredentialCheckMs: number;

  // Retention (src/retention/)
  /** Deleting conversations not updated for `RETENTION_DAYS`; undefined (unset) keeps everything for ever. */
  readonly retention: RetentionConfig | undefined;

  // Reliability: connection timeouts (slow clients); the database's are in `database.timeouts`.
  /** The whole header block of a request must arrive within this time (slowloris headers). */
  readonly httpHeadersTimeoutMs: number;
  /** The whole request, headers and body, must arrive within this time (trickled bodies). */
  readonly httpRequestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this time. */
  readonly httpKeepAliveTimeoutMs: number;
  /** After answering before a request's body was read, how long its rest is read and discarded before closing (lingering close). */
  readonly httpLingerMs: number;
  /** … and at most how many of its bytes. */
  readonly httpLingerBytes: number;

  // Outbound webhooks (src/outbound/, docs/outbound-webhooks.md)
  readonly outboundWebhooks: OutboundWebhookConfig;

  // Rate limits (src/rate-limits/, docs/operations.md "Rate limits, idempotency and caching")
  /** Token buckets per credential (per client IP without one), by the class each operation declares (`x-rate-limit-class`). */
  readonly rateLimits: RateLimitConfig;
  /** `SHARING_ENABLED=false`: no new share links, and every shared read answers 404 (docs/sharing.md). */
  readonly sharingEnabled: boolean;
  // Search inside conversations (src/search/, docs/search.md)
  readonly search: SearchConfig;
}

/** The search indexer (src/search/indexer.ts). */
export interface SearchConfig {
  /** `SEARCH_INDEXER`: whether this instance runs the indexer (one instance at a time indexes, under a lock). */
  readonly indexer: boolean;
  /** `SEARCH_INDEX_INTERVAL_MS`: how long the indexer waits after finding nothing to index. */
  readonly intervalMs: number;
  /** `SEARCH_INDEX_BATCH_EVENTS`: events indexed in one transaction at most. */
  readonly batchEvents: number;
}

/** The classes of `x-rate-limit-class` in the spec: every operation declares one. */
export const RATE_LIMIT_CLASSES = ['reads', 'writes', 'streams', 'admin', 'webhook'] as const;
export type RateLimitClass = (typeof RATE_LIMIT_CLASSES)[number];

/** A token bucket: `perSecond` tokens refill it, up to `burst`; undefined in `RateLimitConfig`: unlimited. */
export interface RateLimitRule {
  readonly perSecond: number;
  readonly burst: number;
}

/** `RATE_LIMIT_<CLASS>` per class (`off`: unlimited). */
export type RateLimitConfig = Readonly<Record<RateLimitClass, RateLimitRule | undefined>>;

/** Limits a person, the console or a script using the API normally never meets; the webhook is not limited (the agent-server cannot slow down). */
export const DEFAULT_RATE_LIMITS: RateLimitConfig = {
  reads: { perSecond: 50, burst: 200 },
  writes: { perSecond: 10, burst: 50 },
  streams: { perSecond: 2, burst: 20 },
  admin: { perSecond: 10, burst: 50 },
  webhook: undefined,
};

/** Bounds of the webhook's group commit, as `GroupCommitter` takes them (src/conversations/group-commit.ts). */
export interface IngestGroupConfig {
  /** Transactions in flight at once (beyond the first, only for full groups); more batches wait. */
  readonly maxInFlight: number;
  /** At most this many batches in one transaction. */
  readonly maxBatches: number;
  /** At most this many events in one transaction (a larger single batch still goes alone). */
  readonly maxEvents: number;
}

/** Retention of conversations (see docs/scaling.md). */
export interface RetentionConfig {
  /** `RETENTION_DAYS`: a conversation not updated for this many days is deleted with its events. */
  readonly days: number;
  /** `RETENTION_ARCHIVE_DIR`: where each conversation is written (gzipped NDJSON) before it is deleted; unset → no archive. */
  readonly archiveDir: string | undefined;
  /** `RETENTION_INTERVAL_MS`: time between two sweeps (the first comes one interval after start). */
  readonly intervalMs: number;
  /** `RETENTION_BATCH_EVENTS`: events deleted per transaction, so that no deletion holds locks or WAL for long. */
  readonly batchEvents: number;
  /** `RETENTION_BATCH_PAUSE_MS`: pause between two batches, leaving the database to ingestion in between. */
  readonly batchPauseMs: number;
}

/** Outbound webhooks: delivery rules, safety switches and the queue's connection. */
export interface OutboundWebhookConfig {
  /** `OUTBOUND_WEBHOOK_ALLOW_HTTP`: accept `http://` targets (tests, local demos). */
  readonly allowHttp: boolean;
  /** `OUTBOUND_WEBHOOK_ALLOW_PRIVATE`: deliver to loopback/private/link-local addresses (tests, local demos). */
  readonly allowPrivate: boolean;
  /** `OUTBOUND_WEBHOOK_TIMEOUT_MS`: one attempt, connection to last byte. */
  readonly timeoutMs: number;
  /** `OUTBOUND_WEBHOOK_MAX_ENDPOINTS`: endpoints per user. */
  readonly maxEndpoints: number;
  /** `OUTBOUND_WEBHOOK_RETRY_SCHEDULE`: delay before each attempt in ms; its length is the number of attempts. */
  readonly retryScheduleMs: readonly number[];
  /** `OUTBOUND_WEBHOOK_RETRY_AFTER_MAX_SECONDS`: the longest a receiver's `Retry-After` (429, 503) defers the next attempt. */
  readonly retryAfterMaxMs: number;
  /** `OUTBOUND_WEBHOOK_DISABLE_AFTER_HOURS`: an endpoint failing every attempt this long is disabled. */
  readonly disableAfterMs: number;
  /** `OUTBOUND_WEBHOOK_ROTATION_OVERLAP_HOURS`: how long the previous secret still signs after a rotation. */
  readonly rotationOverlapMs: number;
  /** `OUTBOUND_WEBHOOK_CONCURRENCY`: queue workers per instance, each running up to 32 jobs at once (a job: one message to its endpoints, or one retry). */
  readonly concurrency: number;
  /** `OUTBOUND_WEBHOOK_POLL_MS`: how often an idle worker looks for due deliveries. */
  readonly pollMs: number;
  /** `OUTBOUND_WEBHOOK_DISPATCH_MS`: how often a worker looks for new messages to fan out (the outbox). */
  readonly dispatchMs: number;
  /** `OUTBOUND_WEBHOOK_YIELD_ABOVE`: webhook batches a second above which delivery yields to ingestion (0: never). */
  readonly yieldAboveBatchesPerSecond: number;
  /** `OUTBOUND_WEBHOOK_WORKER=false`: this instance enqueues but does not deliver. */
  readonly worker: boolean;
  /** `OUTBOUND_WEBHOOK_MESSAGE_RETENTION_DAYS`: a message done with for this long leaves the message log (hourly sweep). */
  readonly messageRetentionDays: number;
}

/** Svix's schedule: at once, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h. */
const DEFAULT_RETRY_SCHEDULE_MS = [0, 5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000];

/** Stripe Checkout: the secret API key, the webhook signing secret and (for tests) the API's address. */
export interface StripeConfig {
  readonly secretKey: string;
  readonly webhookSecret: string;
  /** Where the SDK sends its requests; Stripe's own API unless `STRIPE_API_BASE_URL` names another. */
  readonly apiBaseUrl?: URL;
}

export interface BillingConfig {
  /** Largest amount of one checkout, in whole US dollars. */
  readonly maxAmountUsd: number;
  /** A pending checkout session expires this many minutes after it was created. */
  readonly sessionTtlMinutes: number;
  /** The server's address as browsers reach it; checkout pages and Stripe's return URLs start with it. */
  readonly publicBaseUrl: string;
  /** `stripe` when a Stripe secret key is configured, otherwise the built-in `local` checkout. */
  readonly provider: 'local' | 'stripe';
  readonly stripe?: StripeConfig;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

type Env = Record<string, string | undefined>;

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

/** What the webhook does with events the spec does not know (see `Config.webhookEventCompatibility`). */
export type WebhookEventCompatibility = 'strict' | 'accept-unknown';

function webhookEventCompatibilityOf(value: string | undefined): WebhookEventCompatibility {
  if (!value || value === 'strict') return 'strict';
  if (value === 'accept-unknown') return 'accept-unknown';
  throw new ConfigError(`WEBHOOK_EVENT_COMPATIBILITY must be strict or accept-unknown, got "${value}"`);
}

function responseValidationOf(value: string | undefined): 'off' | 'log' {
  if (!value || value === 'off') return 'off';
  if (value === 'log') return 'log';
  throw new ConfigError(`RESPONSE_VALIDATION must be off or log, got "${value}"`);
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/**
 * The embedded PostgreSQL's port when `EMBEDDED_PG_PORT` is unset: below Linux's ephemeral range
 * (32768–60999), where an outgoing connection of any process may hold a port when we start.
 */
export const DEFAULT_EMBEDDED_PG_PORT = 25432;

/**
 * Reads and validates the configuration. This is the only place that reads `process.env`;
 * everything else receives the frozen result.
 */
export function loadConfig(env: Env = process.env): Config {
  const dataDir = path.resolve(env.DATA_DIR || '.data');
  const databaseUrl = env.DATABASE_URL?.trim();
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL must be a postgres:// or postgresql:// URL');
  }
  const logLevel = env.LOG_LEVEL || 'info';
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got "${logLevel}"`);
  }
  const metricsToken = env.METRICS_TOKEN || undefined;
  if (metricsToken !== undefined && !/^[\x21-\x7e]{16,}$/.test(metricsToken)) {
    throw new ConfigError('METRICS_TOKEN must be at least 16 printable ASCII characters without spaces');
  }
  const poolSize = integer(env, 'DB_POOL_SIZE', 20, 1, 500);
  const credentialCacheTtlMs = integer(env, 'CREDENTIAL_CACHE_TTL_MS', 5_000, 0, 3_600_000);
  const defaults = DEFAULT_DATABASE_TIMEOUTS;
  const timeouts: DatabaseTimeouts = {
    acquireTimeoutMs: integer(env, 'DB_ACQUIRE_TIMEOUT_MS', defaults.acquireTimeoutMs, 100, 600_000),
    queryTimeoutMs: integer(env, 'DB_QUERY_TIMEOUT_MS', defaults.queryTimeoutMs, 100, 3_600_000),
    readinessTimeoutMs: integer(env, 'READINESS_TIMEOUT_MS', defaults.readinessTimeoutMs, 100, 60_000),
  };
  const listenUrl = env.DATABASE_LISTEN_URL?.trim() || undefined;
  if (listenUrl && !/^postgres(ql)?:\/\//.test(listenUrl)) {
    throw new ConfigError('DATABASE_LISTEN_URL must be a postgres:// or postgresql:// URL');
  }
  const poolMode = env.DATABASE_POOL_MODE?.trim() || 'session';
  if (poolMode !== 'session' && poolMode !== 'transaction') {
    throw new ConfigError(`DATABASE_POOL_MODE must be session or transaction, got "${poolMode}"`);
  }
  const applicationName = env.DATABASE_APPLICATION_NAME?.trim() || 'agent-platform';
  if (!/^[\x20-\x7e]{1,63}$/.test(applicationName)) {
    throw new ConfigError('DATABASE_APPLICATION_NAME must be 1 to 63 printable ASCII characters');
  }
  const common = { poolSize, timeouts, poolMode, applicationName } as const;
  const database: DatabaseConfig = databaseUrl
    ? { kind: 'url', url: databaseUrl, listenUrl: listenUrl ?? databaseUrl, ...common }
    : { kind: 'embedded', dataDir, port: integer(env, 'EMBEDDED_PG_PORT', DEFAULT_EMBEDDED_PG_PORT, 1024, 65535), ...common };

  return Object.freeze({
    port: integer(env, 'PORT', 3000, 0, 65535),
    host: env.HOST || '127.0.0.1',
    database,
    dataDir,
    logLevel,
    responseValidation: responseValidationOf(env.RESPONSE_VALIDATION),
    bodyLimitBytes: integer(env, 'BODY_LIMIT_BYTES', 10 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
    webhookSingleEventLimitBytes: integer(env, 'WEBHOOK_SINGLE_EVENT_LIMIT_BYTES', 64 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
    // Four single events at their limit at once: about 1.5 GB of process memory at the peak (docs/operations.md).
    requestBodyBudgetBytes: integer(env, 'REQUEST_BODY_BUDGET_BYTES', 256 * 1024 * 1024, 1024, 16 * 1024 * 1024 * 1024),
    refusedDeliveryRetentionDays: integer(env, 'REFUSED_DELIVERY_RETENTION_DAYS', 14, 1, 3_650),
    maxValidationErrors: integer(env, 'MAX_VALIDATION_ERRORS', 100, 1, 10_000),
    webhookEventCompatibility: webhookEventCompatibilityOf(env.WEBHOOK_EVENT_COMPATIBILITY?.trim()),
    credentialCacheTtlMs,
    invitationTtlDays: integer(env, 'INVITATION_TTL_DAYS', 7, 1, 90),
    shutdownGraceMs: integer(env, 'SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),

    // Issue-tracker workspaces
    secretsEncryptionKeys: secretsEncryptionKeys(env),
    issueTrackerBaseUrl: issueTrackerBaseUrl(env),
    issueTrackerTimeoutMs: integer(env, 'ISSUE_TRACKER_TIMEOUT_MS', 5_000, 100, 120_000),

    // Billing (issue 8)
    billing: loadBillingConfig(env),

    // Webhook group commit
    ingestGroup: Object.freeze({
      maxInFlight: Math.min(integer(env, 'INGEST_MAX_TRANSACTIONS', 2, 1, 500), poolSize),
      maxBatches: integer(env, 'INGEST_GROUP_MAX_BATCHES', 64, 1, 10_000),
      maxEvents: integer(env, 'INGEST_GROUP_MAX_EVENTS', 500, 1, 1_000_000),
    }),

    // Operations (metrics)
    metricsToken,

    // Live conversation streams (src/live/)
    liveStreamBufferBytes: integer(env, 'LIVE_STREAM_BUFFER_BYTES', 1024 * 1024, 16 * 1024, 1024 * 1024 * 1024),
    liveStreamStallMs: integer(env, 'LIVE_STREAM_STALL_MS', 10_000, 100, 3_600_000),
    liveStreamHeartbeatMs: integer(env, 'LIVE_STREAM_HEARTBEAT_MS', 15_000, 50, 3_600_000),
    liveStreamMaxPerUser: integer(env, 'LIVE_STREAM_MAX_PER_USER', 10, 1, 10_000),
    liveStreamTicketTtlMs: integer(env, 'LIVE_STREAM_TICKET_TTL_MS', 60_000, 1_000, 3_600_000),
    liveStreamCredentialCheckMs: integer(env, 'LIVE_STREAM_CREDENTIAL_CHECK_MS', credentialCacheTtlMs || 1_000, 50, 3_600_000),

    retention: loadRetentionConfig(env),

    // Reliability: connection timeouts.
    httpHeadersTimeoutMs: integer(env, 'HTTP_HEADERS_TIMEOUT_MS', 20_000, 100, 600_000),
    httpRequestTimeoutMs: integer(env, 'HTTP_REQUEST_TIMEOUT_MS', 120_000, 100, 3_600_000),
    httpKeepAliveTimeoutMs: integer(env, 'HTTP_KEEP_ALIVE_TIMEOUT_MS', 5_000, 100, 600_000),
    httpLingerMs: integer(env, 'HTTP_LINGER_MS', 5_000, 0, 600_000),
    httpLingerBytes: integer(env, 'HTTP_LINGER_BYTES', 8 * 1024 * 1024, 0, 1024 * 1024 * 1024),

    outboundWebhooks: loadOutboundWebhookConfig(env),
    rateLimits: loadRateLimitConfig(env),

    sharingEnabled: env.SHARING_ENABLED?.trim() ? flag(env, 'SHARING_ENABLED') : true,

    search: Object.freeze({
      indexer: env.SEARCH_INDEXER === undefined || env.SEARCH_INDEXER.trim() === '' ? true : flag(env, 'SEARCH_INDEXER'),
      intervalMs: integer(env, 'SEARCH_INDEX_INTERVAL_MS', 250, 10, 60_000),
      batchEvents: integer(env, 'SEARCH_INDEX_BATCH_EVENTS', 2_000, 1, 100_000),
    }),
  });
}

function loadRateLimitConfig(env: Env): RateLimitConfig {
  const rules = {} as Record<RateLimitClass, RateLimitRule | undefined>;
  for (const limitClass of RATE_LIMIT_CLASSES) {
    const name = `RATE_LIMIT_${limitClass.toUpperCase()}`;
    const raw = env[name]?.trim();
    rules[limitClass] = raw === undefined || raw === '' ? DEFAULT_RATE_LIMITS[limitClass] : rateLimitRule(name, raw);
  }
  return Object.freeze(rules);
}

/** `off`, or `<per second>,<burst>` (`50,200`: 50 requests a second, 200 at once). */
function rateLimitRule(name: string, raw: string): RateLimitRule | undefined {
  if (raw === 'off') return undefined;
  const match = /^(\d+(?:\.\d+)?)\s*,\s*(\d+)$/.exec(raw);
  const perSecond = Number(match?.[1]);
  const burst = Number(match?.[2]);
  if (!match || perSecond <= 0 || perSecond > 1_000_000 || burst < 1 || burst > 10_000_000) {
    throw new ConfigError(`${name} must be off or "<requests per second>,<burst>" (e.g. "50,200"; per second above 0 up to 1000000, burst 1 to 10000000), got "${raw}"`);
  }
  return Object.freeze({ perSecond, burst });
}

function flag(env: Env, name: string): boolean {
  const raw = env[name]?.trim().toLowerCase();
  if (raw === undefined || raw === '') return false;
  if (raw === 'true' || raw === '1') return true;
  if (raw === 'false' || raw === '0') return false;
  throw new ConfigError(`${name} must be true or false, got "${env[name]}"`);
}

function loadOutboundWebhookConfig(env: Env): OutboundWebhookConfig {
  const rawSchedule = env.OUTBOUND_WEBHOOK_RETRY_SCHEDULE?.trim();
  let retryScheduleMs = DEFAULT_RETRY_SCHEDULE_MS;
  if (rawSchedule) {
    retryScheduleMs = rawSchedule.split(',').map((part) => Number(part.trim()));
    if (retryScheduleMs.length < 1 || retryScheduleMs.length > 50 || retryScheduleMs.some((ms) => !Number.isInteger(ms) || ms < 0 || ms > 7 * 86_400_000)) {
      throw new ConfigError('OUTBOUND_WEBHOOK_RETRY_SCHEDULE must be 1 to 50 comma-separated delays in milliseconds (0 to 7 days), e.g. "0,5000,300000"');
    }
  }
  return Object.freeze({
    allowHttp: flag(env, 'OUTBOUND_WEBHOOK_ALLOW_HTTP'),
    allowPrivate: flag(env, 'OUTBOUND_WEBHOOK_ALLOW_PRIVATE'),
    timeoutMs: integer(env, 'OUTBOUND_WEBHOOK_TIMEOUT_MS', 10_000, 100, 300_000),
    maxEndpoints: integer(env, 'OUTBOUND_WEBHOOK_MAX_ENDPOINTS', 20, 1, 1_000),
    retryScheduleMs: Object.freeze(retryScheduleMs),
    retryAfterMaxMs: integer(env, 'OUTBOUND_WEBHOOK_RETRY_AFTER_MAX_SECONDS', 3_600, 0, 86_400) * 1_000,
    disableAfterMs: integer(env, 'OUTBOUND_WEBHOOK_DISABLE_AFTER_HOURS', 120, 1, 10_000) * 3_600_000,
    rotationOverlapMs: integer(env, 'OUTBOUND_WEBHOOK_ROTATION_OVERLAP_HOURS', 24, 0, 720) * 3_600_000,
    concurrency: integer(env, 'OUTBOUND_WEBHOOK_CONCURRENCY', 8, 1, 1_000),
    pollMs: integer(env, 'OUTBOUND_WEBHOOK_POLL_MS', 1_000, 500, 60_000),
    dispatchMs: integer(env, 'OUTBOUND_WEBHOOK_DISPATCH_MS', 200, 10, 60_000),
    yieldAboveBatchesPerSecond: integer(env, 'OUTBOUND_WEBHOOK_YIELD_ABOVE', 20, 0, 1_000_000),
    worker: env.OUTBOUND_WEBHOOK_WORKER === undefined ? true : flag(env, 'OUTBOUND_WEBHOOK_WORKER'),
    // At least 15: recovery and bulk retries reach 14 days back, and never find a message gone.
    messageRetentionDays: integer(env, 'OUTBOUND_WEBHOOK_MESSAGE_RETENTION_DAYS', 30, 15, 3_650),
  });
}

function loadRetentionConfig(env: Env): RetentionConfig | undefined {
  const archiveDir = env.RETENTION_ARCHIVE_DIR?.trim() || undefined;
  if (env.RETENTION_DAYS === undefined || env.RETENTION_DAYS.trim() === '') {
    if (archiveDir) throw new ConfigError('RETENTION_ARCHIVE_DIR is set but RETENTION_DAYS is not: nothing would be archived');
    return undefined;
  }
  return Object.freeze({
    days: integer(env, 'RETENTION_DAYS', 0, 1, 36_500),
    archiveDir: archiveDir ? path.resolve(archiveDir) : undefined,
    intervalMs: integer(env, 'RETENTION_INTERVAL_MS', 3_600_000, 1_000, 7 * 86_400_000),
    batchEvents: integer(env, 'RETENTION_BATCH_EVENTS', 2_000, 1, 1_000_000),
    batchPauseMs: integer(env, 'RETENTION_BATCH_PAUSE_MS', 10, 0, 60_000),
  });
}

function secretsEncryptionKeys(env: Env): readonly SecretKey[] | undefined {
  const raw = env.SECRETS_ENCRYPTION_KEYS?.trim();
  if (!raw) return undefined;
  try {
    return Object.freeze(parseKeyring(raw));
  } catch (error) {
    // The message names the key id at most, never key material.
    if (error instanceof KeyringError) throw new ConfigError(`SECRETS_ENCRYPTION_KEYS: ${error.message}`);
    throw error;
  }
}

function issueTrackerBaseUrl(env: Env): string | undefined {
  const raw = env.ISSUE_TRACKER_BASE_URL?.trim();
  if (!raw) return undefined;
  let url: URL;
  try {
    url = new URL(raw.replaceAll('{workspace}', 'workspace'));
  } catch {
    throw new ConfigError(`ISSUE_TRACKER_BASE_URL must be an http(s) URL, got "${raw}"`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigError(`ISSUE_TRACKER_BASE_URL must be an http(s) URL, got "${raw}"`);
  }
  return raw.replace(/\/+$/, '');
}

/** An absolute http(s) URL without query or fragment, returned without a trailing slash. */
function baseUrl(name: string, raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be an absolute http:// or https:// URL, got "${raw}"`);
  }
  if (!['http:', 'https:'].includes(url.protocol) || url.search || url.hash || url.username || url.password) {
    throw new ConfigError(`${name} must be an absolute http:// or https:// URL without query, fragment or credentials`);
  }
  return url.href.replace(/\/+$/, '');
}

/**
 * Billing settings. Stripe is used when `STRIPE_SECRET_KEY` is set (or `BILLING_PROVIDER=stripe`),
 * and then needs the webhook secret too: without it no payment could ever complete. Stripe accepts a
 * session lifetime of 30 minutes to 24 hours; ours is handed to Stripe, so both expire together.
 */
function loadBillingConfig(env: Env): BillingConfig {
  const secretKey = env.STRIPE_SECRET_KEY?.trim() || undefined;
  const webhookSecret = env.STRIPE_WEBHOOK_SECRET?.trim() || undefined;
  const requested = env.BILLING_PROVIDER?.trim() || (secretKey ? 'stripe' : 'local');
  if (requested !== 'local' && requested !== 'stripe') {
    throw new ConfigError(`BILLING_PROVIDER must be local or stripe, got "${requested}"`);
  }
  let stripe: StripeConfig | undefined;
  if (requested === 'stripe') {
    if (!secretKey) throw new ConfigError('BILLING_PROVIDER=stripe needs STRIPE_SECRET_KEY');
    if (!webhookSecret) throw new ConfigError('STRIPE_SECRET_KEY is set but STRIPE_WEBHOOK_SECRET is not: no payment could complete');
    const apiBase = env.STRIPE_API_BASE_URL?.trim();
    stripe = {
      secretKey,
      webhookSecret,
      ...(apiBase ? { apiBaseUrl: new URL(baseUrl('STRIPE_API_BASE_URL', apiBase)) } : {}),
    };
  }
  const port = integer(env, 'PORT', 3000, 0, 65535);
  const host = env.HOST || '127.0.0.1';
  const reachableHost = host === '0.0.0.0' || host === '::' ? 'localhost' : host.includes(':') ? `[${host}]` : host;
  return {
    maxAmountUsd: integer(env, 'BILLING_MAX_AMOUNT_USD', 10_000, 1, 999_999),
    sessionTtlMinutes: integer(env, 'CHECKOUT_SESSION_TTL_MINUTES', 60, stripe ? 30 : 1, 1440),
    publicBaseUrl: baseUrl('PUBLIC_BASE_URL', env.PUBLIC_BASE_URL?.trim() || `http://${reachableHost}:${port}`),
    provider: requested,
    ...(stripe ? { stripe } : {}),
  };
}
