import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { MikroORM } from '@mikro-orm/postgresql';
import { MIGRATIONS, migrate, ormOptions } from '../../src/db/database.ts';
import { recreateSchema, TABLES, testDatabase } from '../helpers/hooks.ts';

/** Executes SQL on the test database and returns the rows. */
function query<T = Record<string, unknown>>(sql: string, params: unknown[] = []): Promise<T[]> {
  return testDatabase().orm.em.getConnection().execute<T[]>(sql, params);
}

/** An empty `public` schema, as on a brand-new database: no tables, no function, no migrations table. */
async function dropSchema(): Promise<void> {
  await query('drop schema public cascade');
  await query('create schema public');
}

async function tablesInPublic(): Promise<string[]> {
  const rows = await query<{ table_name: string }>(
    "select table_name from information_schema.tables where table_schema = 'public' order by table_name",
  );
  return rows.map((row) => row.table_name);
}

async function ingestFunctionExists(): Promise<boolean> {
  const rows = await query<{ exists: boolean }>("select exists (select 1 from pg_proc where proname = 'ingest_event_batches') as exists");
  return rows[0]!.exists;
}

async function recordedMigrations(): Promise<{ id: number; name: string; executed_at: Date }[]> {
  return query('select id, name, executed_at from mikro_orm_migrations order by id');
}

describe('database migrations', function () {
  this.timeout(60_000);

  // Whatever happens here, the other test files need the fully migrated schema back.
  after(async () => {
    await recreateSchema(testDatabase());
  });

  it('creates every table and the ingest_event_batches function on an empty schema', async () => {
    await dropSchema();
    expect(await tablesInPublic()).to.deep.equal([]);
    expect(await ingestFunctionExists()).to.equal(false);

    await migrate(testDatabase().orm);

    expect(await tablesInPublic()).to.include.members(TABLES);
    expect(await ingestFunctionExists()).to.equal(true);
  });

  it('records every migration, in order, in mikro_orm_migrations', async () => {
    await dropSchema();
    await migrate(testDatabase().orm);
    const recorded = await recordedMigrations();
    expect(recorded.map((row) => row.name)).to.deep.equal(MIGRATIONS.map((migration) => migration.name));
    expect(await tablesInPublic()).to.have.members([...TABLES, 'mikro_orm_migrations']);
  });

  it('leaves a migrated schema and its data untouched when run again', async () => {
    await dropSchema();
    await migrate(testDatabase().orm);
    const before = await recordedMigrations();
    const userId = randomUUID();
    await query('insert into users (id, email) values (?, ?)', [userId, 'kept@example.com']);

    await migrate(testDatabase().orm);

    expect(await recordedMigrations()).to.deep.equal(before);
    expect(await query('select id, email from users')).to.deep.equal([{ id: userId, email: 'kept@example.com' }]);
  });

  it('applies only the pending migrations to a partly migrated schema', async () => {
    await dropSchema();
    const [first] = MIGRATIONS;
    await testDatabase().orm.getMigrator().up({ to: first!.name });
    expect((await recordedMigrations()).map((row) => row.name)).to.deep.equal([first!.name]);
    expect(await ingestFunctionExists()).to.equal(false);

    await migrate(testDatabase().orm);

    expect((await recordedMigrations()).map((row) => row.name)).to.deep.equal(MIGRATIONS.map((migration) => migration.name));
    expect(await ingestFunctionExists()).to.equal(true);
  });

  it('lets two processes migrate a fresh schema at the same time (advisory lock): both succeed, each migration runs once', async () => {
    await dropSchema();
    // Two ORMs with their own pools stand in for two server processes starting together.
    const [one, two] = await Promise.all([
      MikroORM.init(ormOptions(testDatabase().url)),
      MikroORM.init(ormOptions(testDatabase().url)),
    ]);
    try {
      const results = await Promise.allSettled([migrate(one), migrate(two)]);
      expect(results.map((result) => (result.status === 'rejected' ? String(result.reason) : 'ok'))).to.deep.equal(['ok', 'ok']);
    } finally {
      await Promise.all([one.close(true), two.close(true)]);
    }
    expect((await recordedMigrations()).map((row) => row.name)).to.deep.equal(MIGRATIONS.map((migration) => migration.name));
    expect(await tablesInPublic()).to.include.members(TABLES);
    expect(await ingestFunctionExists()).to.equal(true);
  });

  it('also serialises two concurrent calls on one ORM', async () => {
    await dropSchema();
    const orm = testDatabase().orm;
    await Promise.all([migrate(orm), migrate(orm)]);
    expect((await recordedMigrations()).map((row) => row.name)).to.deep.equal(MIGRATIONS.map((migration) => migration.name));
  });

  it('ends with the schema fully migrated and usable', async () => {
    await recreateSchema(testDatabase());
    expect((await recordedMigrations()).map((row) => row.name)).to.deep.equal(MIGRATIONS.map((migration) => migration.name));
    const userId = randomUUID();
    await query('insert into users (id, email) values (?, ?)', [userId, 'owner@example.com']);
    const rows = await query(
      "select batch, owner_id, stored from ingest_event_batches(array[?]::uuid[], array[?]::uuid[], '{}', '{}', '{}', '{}', '[]', '{}', '{}', '{}', '{}')",
      [randomUUID(), userId],
    );
    expect(rows).to.deep.equal([{ batch: 1, owner_id: userId, stored: 0 }]);
  });
});
