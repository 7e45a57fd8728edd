import { MikroORM, type Options } from '@mikro-orm/postgresql';
import { Migrator } from '@mikro-orm/migrations';
import { DEFAULT_DATABASE_TIMEOUTS, type DatabaseConfig, type DatabaseTimeouts } from '../config.ts';
import type { Logger } from '../logger.ts';
import { CredentialSchema, UserSchema } from '../identity/entities.ts';
import { VerifiedModelSchema } from '../verified-models/entities.ts';
import { WorkspaceLinkSchema, WorkspaceSchema } from '../workspaces/entities.ts';
import { startEmbeddedPostgres, type EmbeddedPostgres } from './embedded-postgres.ts';
import { Migration20261122000000_initial } from './migrations/Migration20261122000000_initial.ts';
import { Migration20261122010000_ingest_function } from './migrations/Migration20261122010000_ingest_function.ts';
import { Migration20261122015000_lossless_payloads } from './migrations/Migration20261122015000_lossless_payloads.ts';
import { Migration20261122016000_live_notifications } from './migrations/Migration20261122016000_live_notifications.ts';
import { Migration20261123020000_workspaces } from './migrations/Migration20261123020000_workspaces.ts';
import { Migration20261123030000_billing } from './migrations/Migration20261123030000_billing.ts';
import { CheckoutSessionSchema } from '../billing/entities.ts';
import { Migration20261123040000_conversation_info } from './migrations/Migration20261123040000_conversation_info.ts';
import { Migration20261123050000_live_streams } from './migrations/Migration20261123050000_live_streams.ts';
import { Migration20261123060000_group_commit } from './migrations/Migration20261123060000_group_commit.ts';
import { Migration20261123070000_set_based_ingest } from './migrations/Migration20261123070000_set_based_ingest.ts';
import { Migration20261125010000_search } from './migrations/Migration20261125010000_search.ts';
import { Migration20261125020000_outbound_webhooks } from './migrations/Migration20261125020000_outbound_webhooks.ts';
import { Migration20261125030000_administration } from './migrations/Migration20261125030000_administration.ts';
import { Migration20261125070000_webhook_fanout } from './migrations/Migration20261125070000_webhook_fanout.ts';
import { Migration20261125080000_webhook_outbox } from './migrations/Migration20261125080000_webhook_outbox.ts';
import { Migration20261127010000_webhook_events_marker } from './migrations/Migration20261127010000_webhook_events_marker.ts';
import { Migration20261127020000_retire_legacy_delivery_jobs } from './migrations/Migration20261127020000_retire_legacy_delivery_jobs.ts';
import { Migration20261127100000_unrecognized_events } from './migrations/Migration20261127100000_unrecognized_events.ts';
import { Migration20261127150000_outbound_operations } from './migrations/Migration20261127150000_outbound_operations.ts';
import { Migration20261127160000_webhook_bulk_retry } from './migrations/Migration20261127160000_webhook_bulk_retry.ts';
import { Migration20261127110000_refused_deliveries } from './migrations/Migration20261127110000_refused_deliveries.ts';
import { Migration20261127120000_event_search } from './migrations/Migration20261127120000_event_search.ts';
import { Migration20261127130000_share_links } from './migrations/Migration20261127130000_share_links.ts';
import { Migration20261127135000_usage } from './migrations/Migration20261127135000_usage.ts';
import { Migration20261127136000_usage_rollups } from './migrations/Migration20261127136000_usage_rollups.ts';
import { Migration20261127140000_rate_limits_and_idempotency } from './migrations/Migration20261127140000_rate_limits_and_idempotency.ts';
import { Migration20261127190000_refusal_event_ids } from './migrations/Migration20261127190000_refusal_event_ids.ts';
import { Migration20261127203500_event_search_statistics } from './migrations/Migration20261127203500_event_search_statistics.ts';
import { Migration20261127210000_organizations } from './migrations/Migration20261127210000_organizations.ts';
import { Migration20261127210500_refusal_senders } from './migrations/Migration20261127210500_refusal_senders.ts';
import { Migration20261127211000_usage_members } from './migrations/Migration20261127211000_usage_members.ts';
import { Migration20261127223000_workspace_organizations } from './migrations/Migration20261127223000_workspace_organizations.ts';
import { Migration20261127221000_budgets } from './migrations/Migration20261127221000_budgets.ts';
import { Migration20261127222000_audit_log_org } from './migrations/Migration20261127222000_audit_log_org.ts';
import { Migration20261127220000_organization_invitations } from './migrations/Migration20261127220000_organization_invitations.ts';
import { Migration20261128000000_ingest_pressure } from './migrations/Migration20261128000000_ingest_pressure.ts';
import { Migration20261128220000_webhook_message_retention } from './migrations/Migration20261128220000_webhook_message_retention.ts';
import { AuditEntrySchema } from '../audit/entities.ts';
import { installQueueSchema } from '../outbound/queue-schema.ts';
import { applyFunctionScripts } from './function-scripts.ts';
import { sqlRows } from './sql.ts';
import { Migration20261125040000_spend_ledger } from './migrations/Migration20261125040000_spend_ledger.ts';

/** Every committed migration, in order. Listed, not globbed, so start-up never scans the disk. */
export const MIGRATIONS = [
  { name: 'Migration20261122000000_initial', class: Migration20261122000000_initial },
  { name: 'Migration20261122010000_ingest_function', class: Migration20261122010000_ingest_function },
  { name: 'Migration20261122015000_lossless_payloads', class: Migration20261122015000_lossless_payloads },
  { name: 'Migration20261122016000_live_notifications', class: Migration20261122016000_live_notifications },
  { name: 'Migration20261123020000_workspaces', class: Migration20261123020000_workspaces },
  { name: 'Migration20261123030000_billing', class: Migration20261123030000_billing },
  { name: 'Migration20261123040000_conversation_info', class: Migration20261123040000_conversation_info },
  { name: 'Migration20261123050000_live_streams', class: Migration20261123050000_live_streams },
  { name: 'Migration20261123060000_group_commit', class: Migration20261123060000_group_commit },
  { name: 'Migration20261123070000_set_based_ingest', class: Migration20261123070000_set_based_ingest },
  { name: 'Migration20261125010000_search', class: Migration20261125010000_search },
  { name: 'Migration20261125020000_outbound_webhooks', class: Migration20261125020000_outbound_webhooks },
  { name: 'Migration20261125030000_administration', class: Migration20261125030000_administration },
  { name: 'Migration20261125040000_spend_ledger', class: Migration20261125040000_spend_ledger },
  { name: 'Migration20261125070000_webhook_fanout', class: Migration20261125070000_webhook_fanout },
  { name: 'Migration20261125080000_webhook_outbox', class: Migration20261125080000_webhook_outbox },
  { name: 'Migration20261127010000_webhook_events_marker', class: Migration20261127010000_webhook_events_marker },
  { name: 'Migration20261127020000_retire_legacy_delivery_jobs', class: Migration20261127020000_retire_legacy_delivery_jobs },
  { name: 'Migration20261127100000_unrecognized_events', class: Migration20261127100000_unrecognized_events },
  { name: 'Migration20261127110000_refused_deliveries', class: Migration20261127110000_refused_deliveries },
  { name: 'Migration20261127120000_event_search', class: Migration20261127120000_event_search },
  { name: 'Migration20261127130000_share_links', class: Migration20261127130000_share_links },
  { name: 'Migration20261127135000_usage', class: Migration20261127135000_usage },
  { name: 'Migration20261127136000_usage_rollups', class: Migration20261127136000_usage_rollups },
  { name: 'Migration20261127140000_rate_limits_and_idempotency', class: Migration20261127140000_rate_limits_and_idempotency },
  { name: 'Migration20261127150000_outbound_operations', class: Migration20261127150000_outbound_operations },
  { name: 'Migration20261127160000_webhook_bulk_retry', class: Migration20261127160000_webhook_bulk_retry },
  { name: 'Migration20261127190000_refusal_event_ids', class: Migration20261127190000_refusal_event_ids },
  { name: 'Migration20261127203500_event_search_statistics', class: Migration20261127203500_event_search_statistics },
  { name: 'Migration20261127210000_organizations', class: Migration20261127210000_organizations },
  { name: 'Migration20261127210500_refusal_senders', class: Migration20261127210500_refusal_senders },
  { name: 'Migration20261127211000_usage_members', class: Migration20261127211000_usage_members },
  { name: 'Migration20261127220000_organization_invitations', class: Migration20261127220000_organization_invitations },
  { name: 'Migration20261127221000_budgets', class: Migration20261127221000_budgets },
  { name: 'Migration20261127222000_audit_log_org', class: Migration20261127222000_audit_log_org },
  { name: 'Migration20261127223000_workspace_organizations', class: Migration20261127223000_workspace_organizations },
  { name: 'Migration20261128000000_ingest_pressure', class: Migration20261128000000_ingest_pressure },
  { name: 'Migration20261128220000_webhook_message_retention', class: Migration20261128220000_webhook_message_retention },
];

/** Arbitrary constant: the advisory lock that serialises migrations of concurrent processes. */
const MIGRATION_LOCK_ID = 7_240_114;

/** How the pool's connections reach PostgreSQL (see `DatabaseConfig`). */
export interface SessionOptions {
  readonly poolMode: 'session' | 'transaction';
  readonly applicationName: string;
}

export const DEFAULT_SESSION_OPTIONS: SessionOptions = { poolMode: 'session', applicationName: 'agent-platform' };

export interface Database {
  readonly orm: MikroORM;
  /** The connection URL (for the embedded database it carries the generated password). */
  readonly url: string;
  /** A direct (session) connection URL: LISTEN and session advisory locks (`DATABASE_LISTEN_URL`). */
  readonly listenUrl: string;
  /** True when the database answers a trivial query. */
  isReachable(): Promise<boolean>;
  /** Closes the pool, then stops the embedded PostgreSQL if this process started it. */
  close(): Promise<void>;
}

/** The MikroORM options for a database URL; shared by the server, the CLI and the tests. */
export function ormOptions(
  clientUrl: string,
  log?: Logger,
  poolSize = 10,
  timeouts: DatabaseTimeouts = DEFAULT_DATABASE_TIMEOUTS,
  session: SessionOptions = DEFAULT_SESSION_OPTIONS,
): Options {
  return {
    clientUrl,
    entities: [
      UserSchema,
      CredentialSchema,
      VerifiedModelSchema,
      WorkspaceSchema,
      WorkspaceLinkSchema,
      CheckoutSessionSchema,
      AuditEntrySchema,
    ],
    extensions: [Migrator],
    migrations: { migrationsList: MIGRATIONS, transactional: true, allOrNothing: true, snapshot: false },
    pool: {
      min: 0,
      max: poolSize,
      acquireTimeoutMillis: timeouts.acquireTimeoutMs,
      // A connection whose last query never got its answer (the database stalled and the client-side
      // `query_timeout` gave up on it) is discarded, not handed to the next request to stall again.
      validate: (connection: { readyForQuery?: boolean }) => connection.readyForQuery !== false,
      // Behind a transaction pooler a statement prepared on one server connection is unknown (or
      // already exists) on the next: every named statement of ours (sqlRows' `name`) goes unnamed.
      ...(session.poolMode === 'transaction' ? { afterCreate: unnamedStatementsOnly } : {}),
    } as Options['pool'],
    driverOptions: {
      // knex would otherwise put bound values (credential hashes, event payloads) into error messages.
      compileSqlOnError: false,
      acquireConnectionTimeout: timeouts.acquireTimeoutMs,
      connection: {
        application_name: session.applicationName,
        // PgBouncer refuses any startup parameter it does not track ("unsupported startup parameter:
        // statement_timeout"); behind it the pooler's server connections carry the timeout instead.
        ...(session.poolMode === 'session' ? { statement_timeout: timeouts.queryTimeoutMs } : {}),
        // The client-side bound for a database that stopped answering altogether (no statement_timeout
        // can fire then): a little longer, so the server's own timeout normally comes first.
        query_timeout: timeouts.queryTimeoutMs + 2_000,
        // A database that does not even accept the TCP connection fails the connect, not the request.
        connectionTimeoutMillis: timeouts.acquireTimeoutMs,
        // Notice a peer that vanished without closing the connection (cable pulled, host gone).
        keepAlive: true,
        keepAliveInitialDelayMillis: 10_000,
      },
    },
    // Missing tables or columns should fail the migration test, not be papered over at start-up.
    ensureDatabase: false,
    discovery: { warnWhenNoEntities: true },
    debug: false,
    logger: (message) => log?.debug({ orm: message }, 'mikro-orm'),
  };
}

type QueryConfig = { name?: string } & Record<string, unknown>;

/** knex pool hook: the connection's queries lose their `name`, so nothing is prepared by name. */
export function unnamedStatementsOnly(
  connection: { query: (...args: unknown[]) => unknown },
  done: (error: Error | null, connection: unknown) => void,
): void {
  const query = connection.query.bind(connection);
  connection.query = (config: unknown, ...rest: unknown[]) => {
    if (config && typeof config === 'object' && 'name' in config) {
      const { name: _name, ...unnamed } = config as QueryConfig;
      return query(unnamed, ...rest);
    }
    return query(config, ...rest);
  };
  done(null, connection);
}

/**
 * Applies every pending migration, then the stored functions' scripts that changed (src/db/functions),
 * then installs the job queue's schema (pg-boss, for outbound webhooks) if missing; safe to call from
 * several processes at once.
 */
export async function migrate(orm: MikroORM): Promise<void> {
  const knex = orm.em.getConnection().getKnex();
  await knex.transaction(async (trx) => {
    await sqlRows(trx, 'select pg_advisory_xact_lock($1)', [MIGRATION_LOCK_ID]);
    const ran = await orm.getMigrator().up();
    await applyFunctionScripts(trx, ran.length > 0);
  });
  const client = knex.client;
  const connection = await client.acquireConnection();
  try {
    await installQueueSchema(connection);
  } finally {
    await client.releaseConnection(connection);
  }
}

/**
 * Behind a transaction pooler our `statement_timeout` cannot travel in the startup packet, and a
 * `SET` would stay on whichever server connection ran it: the pooler's connections must carry it
 * (PgBouncer's `connect_query`, or `ALTER ROLE … SET statement_timeout`). Says so when they do not.
 */
async function checkPooledStatementTimeout(orm: MikroORM, timeouts: DatabaseTimeouts, log: Logger): Promise<void> {
  const [row] = await sqlRows<{ ms: string }>(
    orm.em,
    "select current_setting('statement_timeout') as setting, extract(epoch from current_setting('statement_timeout')::interval) * 1000 as ms",
  );
  const ms = Number(row?.ms);
  if (ms !== timeouts.queryTimeoutMs) {
    log.warn(
      { statementTimeoutMs: ms, expectedMs: timeouts.queryTimeoutMs },
      'DATABASE_POOL_MODE=transaction: the pooled connections\' statement_timeout differs from DB_QUERY_TIMEOUT_MS; set it at the pooler (PgBouncer connect_query) or with ALTER ROLE … SET statement_timeout',
    );
  }
}

/**
 * Opens the database the configuration names: `DATABASE_URL`, or else an embedded PostgreSQL under
 * the data directory. Pending migrations are applied before this returns.
 */
export async function openDatabase(config: DatabaseConfig, log: Logger): Promise<Database> {
  const { timeouts } = config;
  let embedded: EmbeddedPostgres | undefined;
  let url: string;
  let listenUrl: string;
  if (config.kind === 'url') {
    url = config.url;
    listenUrl = config.listenUrl;
  } else {
    embedded = await startEmbeddedPostgres({ dataDir: config.dataDir, port: config.port }, log);
    url = embedded.url;
    listenUrl = url;
  }
  let orm: MikroORM;
  try {
    orm = await MikroORM.init(ormOptions(url, log, config.poolSize, timeouts, config));
    await migrate(orm);
    if (config.poolMode === 'transaction') await checkPooledStatementTimeout(orm, timeouts, log);
  } catch (error) {
    await embedded?.stop();
    throw error;
  }
  return {
    orm,
    url,
    listenUrl,
    async isReachable() {
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), timeouts.readinessTimeoutMs);
      });
      const probe = sqlRows(orm.em, 'select 1').then(
          () => true,
          () => false,
        );
      try {
        return await Promise.race([probe, timedOut]);
      } finally {
        clearTimeout(timer);
      }
    },
    async close() {
      await orm.close(true);
      await embedded?.stop();
    },
  };
}
