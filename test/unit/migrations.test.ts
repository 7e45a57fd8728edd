import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { MikroORM } from '@mikro-orm/postgresql';
import { MIGRATIONS, migrate, ormOptions } from '../../src/db/database.ts';
import { FUNCTION_SCRIPTS_TABLE, functionScripts } from '../../src/db/function-scripts.ts';
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

/** Each function of ours in `public` (not an extension's), with its body as PostgreSQL keeps it. */
async function storedFunctions(): Promise<Map<string, string>> {
  const rows = await query<{ name: string; body: string }>(
    `select p.proname as name, p.prosrc as body from pg_proc p join pg_namespace n on n.oid = p.pronamespace
     where n.nspname = 'public' and not exists (select 1 from pg_depend d where d.objid = p.oid and d.deptype = 'e')`,
  );
  return new Map(rows.map((row) => [row.name, row.body]));
}

/** Each trigger of ours: its name and the function it runs. */
async function triggers(): Promise<{ name: string; function: string }[]> {
  return query("select tgname as name, tgfoid::regproc::text as function from pg_trigger where not tgisinternal order by tgname");
}

/** Asserts the database holds exactly the functions and triggers of src/db/functions, with their bodies. */
async function expectFunctionsOfTheScripts(): Promise<void> {
  const scripts = functionScripts();
  const stored = await storedFunctions();
  expect([...stored.keys()].sort()).to.deep.equal(scripts.map((script) => script.name));
  for (const script of scripts) {
    const body = /create or replace function \w+\([^]*? as \$\$([^]*?)\$\$;/.exec(script.sql)?.[1];
    expect(stored.get(script.name), script.name).to.equal(body);
  }
  for (const trigger of await triggers()) {
    const script = scripts.find((candidate) => candidate.name === trigger.function);
    expect(script?.sql, trigger.name).to.include(`create or replace trigger ${trigger.name} `);
  }
  const declared = scripts.flatMap((script) => [...script.sql.matchAll(/create or replace trigger (\w+)/g)].map((match) => match[1]));
  expect((await triggers()).map((trigger) => trigger.name)).to.have.members(declared);
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
    expect(await tablesInPublic()).to.have.members([...TABLES, 'mikro_orm_migrations', FUNCTION_SCRIPTS_TABLE]);
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

  it('fills the event ids of refusals kept before Migration20261127190000_refusal_event_ids from their bodies', async () => {
    await dropSchema();
    await testDatabase().orm.getMigrator().up({ to: 'Migration20261127150000_outbound_operations' });
    const bodies: [string, Buffer | null][] = [
      ['events', Buffer.from(JSON.stringify([{ kind: 'MessageEvent', id: 'b' }, { kind: 'StreamingDeltaEvent' }, { kind: 'FutureEvent', id: 'a' }, { kind: 'MessageEvent', id: 'b' }]))],
      ['long', Buffer.from(JSON.stringify(Array.from({ length: 1200 }, (_, i) => ({ kind: 'MessageEvent', id: `e${i}` }))))],
      ['no id', Buffer.from(JSON.stringify([{ kind: 'MessageEvent' }]))],
      ['not json', Buffer.from('[{"kind": "MessageEvent"')],
      ['not utf-8', Buffer.from([0x5b, 0xff, 0x5d])],
      ['not read', null],
    ];
    for (const [fingerprint, body] of bodies) {
      await query(
        `insert into refused_deliveries (owner_id, conversation_id, status, reason, detail, fingerprint, body) values (?, 'c', 422, 'r', 'd', ?, ?)`,
        [randomUUID(), fingerprint, body],
      );
    }
    await migrate(testDatabase().orm);
    const rows = await query<{ fingerprint: string; event_ids: string[] | null }>('select fingerprint, event_ids from refused_deliveries order by id');
    const kept = new Map(rows.map((row) => [row.fingerprint, row.event_ids]));
    expect(kept.get('events')).to.deep.equal(['b', 'a']);
    expect(kept.get('long')).to.have.length(1000);
    expect(kept.get('long')!.at(-1)).to.equal('e999');
    for (const fingerprint of ['no id', 'not json', 'not utf-8', 'not read']) expect(kept.get(fingerprint), fingerprint).to.equal(null);
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

  it('defines every stored function and trigger once, as its file in src/db/functions says', async () => {
    await dropSchema();
    await migrate(testDatabase().orm);
    await expectFunctionsOfTheScripts();
  });

  it('brings a database made by the older migrations, whose functions differ and are not recorded, to the scripts', async () => {
    await dropSchema();
    await migrate(testDatabase().orm);
    // What the older chain left: function bodies of its own, a trigger defined otherwise, no record of scripts.
    await query(`drop table ${FUNCTION_SCRIPTS_TABLE}`);
    await query("create or replace function notify_status_changed() returns trigger language plpgsql as $$ begin return null; end $$");
    await query('drop trigger webhook_conversation_updated on conversations');
    await query(`create trigger webhook_conversation_updated after update of event_count, execution_status on conversations
      for each row execute function webhook_conversation_changed()`);

    await migrate(testDatabase().orm);

    await expectFunctionsOfTheScripts();
    const [definition] = await query<{ def: string }>(
      "select pg_get_triggerdef(oid) as def from pg_trigger where tgname = 'webhook_conversation_updated'",
    );
    expect(definition!.def).to.match(/AFTER UPDATE OF execution_status ON/);
  });

  it('applies a script again only when its file changed (its checksum differs from the recorded one)', async () => {
    await dropSchema();
    await migrate(testDatabase().orm);
    const recorded = () => query<{ name: string; applied_at: string }>(`select name, applied_at::text from ${FUNCTION_SCRIPTS_TABLE} order by name`);
    const before = await recorded();
    expect(before.map((row) => row.name)).to.deep.equal(functionScripts().map((script) => script.name));
    await query("create or replace function audit_log_refuse_change() returns trigger language plpgsql as $$ begin return old; end $$");
    await query(`update ${FUNCTION_SCRIPTS_TABLE} set checksum = 'an older file' where name = 'audit_log_refuse_change'`);

    await migrate(testDatabase().orm);

    const after = await recorded();
    const changed = after.filter((row, i) => row.applied_at !== before[i]!.applied_at);
    expect(changed.map((row) => row.name)).to.deep.equal(['audit_log_refuse_change']);
    await expectFunctionsOfTheScripts();
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
