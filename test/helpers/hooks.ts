import fs from 'node:fs';
import path from 'node:path';
import { loadConfig, type Config } from '../../src/config.ts';
import { createLogger } from '../../src/logger.ts';
import { migrate, openDatabase, type Database } from '../../src/db/database.ts';
import { TEST_PG_PORT } from '../../scripts/lib/test-runner-env.ts';

/**
 * Root hooks: one database for the whole run, emptied before every test.
 * Embedded PostgreSQL under `.data/test` by default (its own port, so a running `npm start` is
 * untouched); the server named by `DATABASE_URL` when that is set.
 */
let database: Database | undefined;
let config: Config | undefined;

/** Configuration for tests: the environment's, with test-specific data directory and port. */
export function testConfig(): Config {
  config ??= loadConfig({
    ...process.env,
    DATA_DIR: process.env.TEST_DATA_DIR ?? '.data/test',
    EMBEDDED_PG_PORT: process.env.TEST_EMBEDDED_PG_PORT ?? String(TEST_PG_PORT),
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
    CREDENTIAL_CACHE_TTL_MS: '0',
    // Every response of an app built for a test is checked against the spec (test/helpers/response-contract.ts).
    RESPONSE_VALIDATION: 'log',
    // Tells the tests' own connections apart from the servers' in pg_stat_activity.
    DATABASE_APPLICATION_NAME: 'agent-platform-tests',
  });
  return config;
}

/** The database opened for this test run. */
export function testDatabase(): Database {
  if (!database) throw new Error('the test database is not open (root hooks did not run)');
  return database;
}

/** Drops everything and applies the migrations again, as on a brand-new database. */
export async function recreateSchema(db: Database): Promise<void> {
  const connection = db.orm.em.getConnection();
  await connection.execute('drop schema public cascade');
  // The job queue's schema (pg-boss, installed by migrate) goes too: its jobs name our messages.
  await connection.execute('drop schema if exists pgboss cascade');
  await connection.execute('create schema public');
  await migrate(db.orm);
}

/** Every table the migrations create (bar MikroORM's own): emptied before each test. */
export const TABLES = [
  'ingest_pressure',
  'idempotency_records',
  'rate_limit_instances',
  'share_links',
  'refused_deliveries',
  'delivery_refusal_notices',
  'usage_model_days',
  'usage_owner_days',
  'usage_member_days',
  'usage_conversation_members',
  'usage_conversation_models',
  'usage_conversations',
  'usage_daily',
  'budget_alerts',
  'organization_budgets',
  'spend_member_months',
  'spend_months',
  'spend_entries',
  'spend_totals',
  'spend_usages',
  'audit_log',
  'webhook_recover_tasks',
  'webhook_endpoint_throttle',
  'webhook_attempts',
  'webhook_deliveries',
  'webhook_messages',
  'webhook_endpoints',
  'stream_tickets',
  'conversation_infos',
  'credit_ledger',
  'checkout_sessions',
  'tracker_deliveries',
  'workspace_links',
  'workspaces',
  'event_search',
  'conversation_events',
  'conversations',
  'verified_models',
  'credentials',
  'organization_invitations',
  'organization_members',
  'organizations',
  'users',
];

const DEADLOCK = '40P01';

/** The sequences that moved since their last reset, with the table whose identity or serial each is. */
const MOVED_SEQUENCES = `from pg_sequences s
  join pg_class seq on seq.relname = s.sequencename and seq.relnamespace = 'public'::regnamespace
  join pg_depend d on d.objid = seq.oid and d.deptype in ('a', 'i')
  join pg_class owner on owner.oid = d.refobjid
  where s.schemaname = 'public' and s.last_value is not null`;

/**
 * The tables a test used: those holding a row, and those whose identity moved since their last reset.
 * Emptying only these keeps each test's reset to a few tables.
 */
const USED_TABLES = `${TABLES.map((table) => `select '${table}' as name where exists (select 1 from ${table})`).join(' union all ')}
  union
  select owner.relname::text ${MOVED_SEQUENCES}`;

/** The identities and serials of `tables` start again, as `truncate … restart identity` would. */
function restartSequences(tables: string[]): string {
  return `select setval(seq.oid, s.start_value, false) ${MOVED_SEQUENCES} and owner.relname in (${tables.map((table) => `'${table}'`).join(', ')})`;
}

/**
 * Empties every table a test used, with `delete` rather than `truncate`: a test leaves a few rows, and
 * `truncate … cascade` gives every table that references `organizations` (nearly all) new files, about
 * 170 ms a test against under 10. Foreign keys and triggers are off for the transaction
 * (`session_replication_role`), so the order does not matter and no cascade runs. A server of an earlier
 * test may still be stopping on the same database and lock tables in another order: PostgreSQL then cancels
 * one of the two, so a deadlock is tried again.
 */
async function emptyUsedTables(): Promise<void> {
  const knex = testDatabase().orm.em.getConnection().getKnex();
  for (let attempt = 1; ; attempt++) {
    try {
      await knex.transaction(async (trx) => {
        // Waits, as `truncate` did, for a write still in flight (a server of the test stopping), so its rows go too.
        await trx.raw(`lock table ${TABLES.join(', ')} in exclusive mode`);
        const used = new Set(((await trx.raw(USED_TABLES)) as { rows: { name: string }[] }).rows.map((row) => row.name));
        const tables = TABLES.filter((table) => used.has(table));
        if (tables.length === 0) return;
        await trx.raw(['set local session_replication_role = replica', ...tables.map((table) => `delete from ${table}`), restartSequences(tables)].join(';\n'));
      });
      return;
    } catch (error) {
      if ((error as { code?: string }).code !== DEADLOCK || attempt === 5) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50 * attempt));
    }
  }
}

/**
 * Seconds per test file, each test counted from the end of the one before (so with its hooks), written to
 * TEST_TIMINGS_OUT at the end: how `npm test` balances its shards (scripts/run-tests.ts, test/timings.json).
 */
const secondsPerFile: Record<string, number> = {};
let lastTestEnded = 0;
const REPOSITORY_ROOT = path.resolve(import.meta.dirname, '..', '..');

export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(60_000);
    database = await openDatabase(testConfig().database, createLogger('warn'));
    await recreateSchema(database);
    lastTestEnded = performance.now();
  },
  async beforeEach() {
    await emptyUsedTables();
    // Delivery jobs of earlier tests would name messages that no longer exist.
    await testDatabase().orm.em.getConnection().execute(`delete from pgboss.job`);
  },
  afterEach(this: Mocha.Context) {
    const now = performance.now();
    const file = this.currentTest?.file;
    if (file) {
      const name = path.relative(REPOSITORY_ROOT, file).split(path.sep).join('/');
      secondsPerFile[name] = (secondsPerFile[name] ?? 0) + (now - lastTestEnded) / 1000;
    }
    lastTestEnded = now;
  },
  async afterAll() {
    await database?.close();
    if (process.env.TEST_TIMINGS_OUT) fs.writeFileSync(process.env.TEST_TIMINGS_OUT, JSON.stringify(secondsPerFile));
  },
};
