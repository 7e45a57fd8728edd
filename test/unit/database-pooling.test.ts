import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { ormOptions, unnamedStatementsOnly } from '../../src/db/database.ts';

/** Settings for running behind a transaction-pooling PgBouncer (docs/scaling.md); end to end in test/system/cluster.test.ts. */
describe('DATABASE_POOL_MODE, DATABASE_LISTEN_URL, DATABASE_APPLICATION_NAME', () => {
  const url = 'postgres://app@pgbouncer:6432/app';

  it('LISTEN goes to DATABASE_URL unless DATABASE_LISTEN_URL names a direct connection', () => {
    const plain = loadConfig({ DATABASE_URL: url }).database;
    expect(plain).to.include({ kind: 'url', url, listenUrl: url, poolMode: 'session', applicationName: 'agent-platform' });
    const pooled = loadConfig({ DATABASE_URL: url, DATABASE_LISTEN_URL: 'postgres://app@db:5432/app', DATABASE_POOL_MODE: 'transaction' }).database;
    expect(pooled).to.include({ listenUrl: 'postgres://app@db:5432/app', poolMode: 'transaction' });
  });

  it('refuses a DATABASE_LISTEN_URL that is not postgres://, and an unknown DATABASE_POOL_MODE', () => {
    expect(() => loadConfig({ DATABASE_URL: url, DATABASE_LISTEN_URL: 'mysql://db/app' })).to.throw(ConfigError, /DATABASE_LISTEN_URL/);
    expect(() => loadConfig({ DATABASE_URL: url, DATABASE_POOL_MODE: 'statement' })).to.throw(ConfigError, /DATABASE_POOL_MODE/);
  });

  it('sends statement_timeout as a startup parameter only in session mode (PgBouncer refuses it), application_name in both', () => {
    const connection = (poolMode: 'session' | 'transaction') =>
      (ormOptions(url, undefined, 5, undefined, { poolMode, applicationName: 'ingest-a' }).driverOptions as { connection: Record<string, unknown> }).connection;
    expect(connection('session')).to.include({ statement_timeout: 30_000, application_name: 'ingest-a' });
    expect(connection('transaction')).to.include({ application_name: 'ingest-a' });
    expect(connection('transaction')).not.to.have.property('statement_timeout');
  });

  it('sends every named statement unnamed in transaction mode (PgBouncer 1.18 cannot keep prepared statements)', () => {
    const pool = (poolMode: 'session' | 'transaction') =>
      ormOptions(url, undefined, 5, undefined, { poolMode, applicationName: 'a' }).pool as { afterCreate?: unknown };
    expect(pool('session').afterCreate).to.equal(undefined);
    const sent: unknown[] = [];
    const connection = { query: (config: unknown) => sent.push(config) };
    (pool('transaction').afterCreate as typeof unnamedStatementsOnly)(connection, () => {});
    connection.query({ name: 'ingest_event_batches', text: 'select 1', values: [] });
    connection.query('select 2');
    expect(sent).to.deep.equal([{ text: 'select 1', values: [] }, 'select 2']);
  });
});
