import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { migrate } from '../../src/db/database.ts';
import { parseKeyring } from '../../src/crypto/secret-box.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { issueFixtureCredential } from '../helpers/fixtures.ts';
import { recreateSchema, testDatabase } from '../helpers/hooks.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';
import { minimalEvent } from '../fixtures/events.ts';

/**
 * The organizations migration on a database holding today's single-user data. `before.json` was
 * recorded by the app as it was before organizations (commit 76c0252, test/fixtures/organizations-migration/record.ts):
 * two users' rows, made through that app's API, and what each user then read through it. Here the
 * rows go into a database migrated to the last migration before organizations, the database is
 * migrated to the latest, and each user must read the same with the same credentials.
 */
const LAST_BEFORE_ORGANIZATIONS = 'Migration20261127203500_event_search_statistics';
const ORGANIZATIONS = 'Migration20261127210000_organizations';

type Reading = [credential: 'X-Access-Token' | 'X-Session-API-Key', url: string, status: number, body: any];
interface RecordedUser {
  id: string;
  email: string;
  accessToken: string;
  sessionApiKey: string;
}
interface Recording {
  secretsEncryptionKeys: string;
  users: { ada: RecordedUser; bo: RecordedUser };
  tables: Record<string, Record<string, unknown>[]>;
  readings: { ada: Reading[]; bo: Reading[] };
}

const recording = JSON.parse(readFileSync(new URL('../fixtures/organizations-migration/before.json', import.meta.url), 'utf8')) as Recording;
const { ada, bo } = recording.users;
for (const user of [ada, bo]) {
  rememberSecret(user.accessToken);
  rememberSecret(user.sessionApiKey);
}

/**
 * Fields that change by reading or by the passing of time, not by the migration: `last_used_at` of
 * a key is stamped when it authenticates (the readings themselves use the keys); `indexed_through`
 * is "now" once every event is indexed.
 */
const VOLATILE = new Set(['last_used_at', 'indexed_through']);

/** Fields a newer contract adds to a response (additions are compatible; nothing else may differ). */
const ADDED_SINCE: Record<string, string[]> = {
  '/api/me': ['organizations', 'default_org_id', 'org_id', 'org_role', 'org_permissions'],
  // Spend rows name the member who spent (null: charged before members were recorded).
  '/api/billing/spend': ['member_id', 'email'],
};

/** Error details reworded since the recording, for the organizations (the status stays the same). */
const REWORDED: Record<string, string> = { 'This conversation belongs to another user': 'This conversation belongs to another organization' };

/** The body with volatile fields replaced by whether they were set, and fields added since recording dropped. */
function comparable(url: string, body: unknown): unknown {
  const added = new Set(ADDED_SINCE[url] ?? []);
  const walk = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map((item) => walk(item));
    if (typeof value === 'string') return REWORDED[value] ?? value;
    if (value === null || typeof value !== 'object') return value;
    return Object.fromEntries(
      Object.entries(value)
        .filter(([key]) => !added.has(key))
        .map(([key, item]) => [key, VOLATILE.has(key) ? item !== null : walk(item)]),
    );
  };
  return walk(body);
}

function query<T = Record<string, unknown>>(sql: string, params: unknown[] = []): Promise<T[]> {
  return testDatabase().orm.em.getConnection().execute<T[]>(sql, params);
}

/** An empty database migrated to `LAST_BEFORE_ORGANIZATIONS` (as a server of that version left it), holding the recorded rows. */
async function databaseOfTheRecording(): Promise<void> {
  await query('drop schema public cascade');
  await query('drop schema if exists pgboss cascade');
  await query('create schema public');
  await testDatabase().orm.getMigrator().up({ to: LAST_BEFORE_ORGANIZATIONS });
  const knex = testDatabase().orm.em.getConnection().getKnex();
  await knex.transaction(async (trx) => {
    // The rows are loaded as they were dumped: no trigger fires and no foreign key is checked on the way in.
    await trx.raw('set local session_replication_role = replica');
    for (const [table, rows] of Object.entries(recording.tables)) {
      const columns: { column_name: string }[] = (
        await trx.raw(
          "select column_name from information_schema.columns where table_schema = 'public' and table_name = ? and is_generated = 'NEVER' order by ordinal_position",
          [table],
        )
      ).rows;
      const list = columns.map((column) => `"${column.column_name}"`).join(', ');
      await trx.raw(`insert into ${table} (${list}) overriding system value select ${list} from json_populate_recordset(null::${table}, ?::json)`, [JSON.stringify(rows)]);
    }
    // Identities and serials continue after the loaded rows, as they did on the recording's database.
    const sequences: { tbl: string; col: string; seq: string }[] = (
      await trx.raw(
        // From the catalog: the planner may call pg_get_serial_sequence on information_schema's own views before a schema filter.
        `select t.relname as tbl, a.attname as col, s.oid::regclass::text as seq
         from pg_class s
         join pg_depend d on d.classid = 'pg_class'::regclass and d.objid = s.oid and d.deptype in ('a', 'i')
         join pg_class t on t.oid = d.refobjid
         join pg_attribute a on a.attrelid = t.oid and a.attnum = d.refobjsubid
         where s.relkind = 'S' and s.relnamespace = 'public'::regnamespace`,
      )
    ).rows;
    for (const { tbl, col, seq } of sequences) {
      if (!recording.tables[tbl]) continue;
      await trx.raw(`select setval(?, (select max("${col}") from ${tbl}))`, [seq]);
    }
  });
}

/** Reads what `user` read in the recording, with the same credential, and asserts each answer is the same. */
async function expectSameReadings(client: TestApp, user: RecordedUser, readings: Reading[]): Promise<void> {
  for (const [credential, url, status, body] of readings) {
    const response = await client.request.get(url).set(credential, credential === 'X-Access-Token' ? user.accessToken : user.sessionApiKey);
    const label = `${user.email} ${credential} GET ${url}`;
    expect(response.status, label).to.equal(status);
    expect(comparable(url.split('?')[0]!, response.body), label).to.deep.equal(comparable(url.split('?')[0]!, body));
  }
}

describe('Migration20261127210000_organizations on a database of single users (before.json, recorded before organizations)', function () {
  this.timeout(60_000);
  let client: TestApp;

  before(async () => {
    client = await createTestApp({ secretsEncryptionKeys: parseKeyring(recording.secretsEncryptionKeys) });
  });
  beforeEach(async () => {
    await databaseOfTheRecording();
  });
  // The root hooks empty the latest schema's tables before each test: a test ends on it, whatever happened.
  afterEach(async () => {
    await migrate(testDatabase().orm);
  });
  // And the other test files need a fresh one.
  after(async () => {
    await recreateSchema(testDatabase());
  });

  it('holds the recording at the last migration before organizations (no organizations table yet)', async () => {
    const tables = await query<{ name: string }>("select table_name as name from information_schema.tables where table_schema = 'public'");
    expect(tables.map((table) => table.name)).to.include.members(Object.keys(recording.tables)).and.not.include('organizations');
    const [counts] = await query<{ users: number; conversations: number; events: number; endpoints: number; credits: number }>(
      `select (select count(*)::int from users) as users, (select count(*)::int from conversations) as conversations,
              (select count(*)::int from conversation_events) as events, (select count(*)::int from webhook_endpoints) as endpoints,
              (select count(*)::int from credit_ledger) as credits`,
    );
    expect(counts).to.deep.equal({ users: 2, conversations: 3, events: 9, endpoints: 2, credits: 2 });
  });

  it('lets each user read exactly what they read before (conversations, events, search, keys, credits, spend, usage, endpoints, workspace link), with the same credentials', async () => {
    await migrate(testDatabase().orm);
    expect(recording.readings.ada.length).to.be.greaterThan(20);
    await expectSameReadings(client, ada, recording.readings.ada);
    await expectSameReadings(client, bo, recording.readings.bo);
  });

  it("gives each user a personal organization with the user's id and name, the user its owner, and puts their data in it", async () => {
    await migrate(testDatabase().orm);
    const organizations = await query<{ id: string; name: string; personal: boolean; suspended_at: Date | null }>(
      'select id, name, personal, suspended_at from organizations order by name',
    );
    expect(organizations).to.deep.equal([
      { id: ada.id, name: ada.email, personal: true, suspended_at: null },
      { id: bo.id, name: bo.email, personal: true, suspended_at: null },
    ]);
    const members = await query('select org_id, user_id, role from organization_members order by role, user_id');
    expect(members).to.have.deep.members([
      { org_id: ada.id, user_id: ada.id, role: 'owner' },
      { org_id: bo.id, user_id: bo.id, role: 'owner' },
    ]);
    expect(await query('select default_org_id from users')).to.deep.equal([{ default_org_id: null }, { default_org_id: null }]);
    // Session keys act in their user's personal organization; access tokens choose per request.
    const keys = await query<{ user_id: string; kind: string; org_id: string | null }>('select user_id, kind, org_id from credentials');
    for (const key of keys) expect(key.org_id, `${key.kind} of ${key.user_id}`).to.equal(key.kind === 'session_api_key' ? key.user_id : null);
    // What a user owned, their organization owns: the same id, so no row was rewritten.
    for (const table of ['conversations', 'webhook_endpoints', 'credit_ledger', 'checkout_sessions', 'spend_totals', 'workspaces']) {
      const owners = await query<{ owner_id: string }>(`select distinct owner_id::text from ${table}`);
      expect(owners.map((row) => row.owner_id), table).to.have.members(table === 'workspaces' ? [ada.id] : [ada.id, bo.id]);
    }
    const [foreignKeys] = await query<{ to_users: number }>(
      `select count(*)::int as to_users from pg_constraint con join pg_attribute a on a.attrelid = con.conrelid and a.attnum = con.conkey[1]
       where con.contype = 'f' and con.confrelid = 'users'::regclass and a.attname = 'owner_id'`,
    );
    expect(foreignKeys!.to_users, 'owner_id columns still referencing users').to.equal(0);
  });

  it("keeps each user's session key working: new events land in the user's conversations only, as before", async () => {
    await migrate(testDatabase().orm);
    const conversationId = randomUUID();
    await client.request
      .post(`/api/v1/webhooks/events/${conversationId}`)
      .set('X-Session-API-Key', ada.sessionApiKey)
      .send([minimalEvent('MessageEvent')])
      .expect(200);
    const adaList = await client.request.get('/api/v1/conversations').set('X-Access-Token', ada.accessToken).expect(200);
    const boList = await client.request.get('/api/v1/conversations').set('X-Access-Token', bo.accessToken).expect(200);
    expect(adaList.body.items.map((item: { id: string }) => item.id)).to.include(conversationId).and.have.length(3);
    expect(boList.body.items.map((item: { id: string }) => item.id)).not.to.include(conversationId);
    // Ada's old key cannot write into Bo's conversation, as before.
    const [boConversation] = recording.readings.bo.find(([, url]) => url === '/api/v1/conversations')![3].items;
    const refused = await client.request
      .post(`/api/v1/webhooks/events/${boConversation.id}`)
      .set('X-Session-API-Key', ada.sessionApiKey)
      .send([minimalEvent('MessageEvent')]);
    expect(refused.status).to.be.oneOf([403, 404]);
  });

  it('gives a user created after the migration a personal organization too (the trigger), and their key works in it', async () => {
    await migrate(testDatabase().orm);
    const userId = randomUUID();
    await query('insert into users (id, email) values (?, ?)', [userId, 'cy@example.com']);
    expect(await query('select id, name, personal from organizations where id = ?', [userId])).to.deep.equal([{ id: userId, name: 'cy@example.com', personal: true }]);
    expect(await query('select role from organization_members where org_id = ? and user_id = ?', [userId, userId])).to.deep.equal([{ role: 'owner' }]);
    const sessionApiKey = await issueFixtureCredential(userId, 'session_api_key');
    const accessToken = await issueFixtureCredential(userId, 'access_token');
    const conversationId = randomUUID();
    await client.request.post(`/api/v1/webhooks/events/${conversationId}`).set('X-Session-API-Key', sessionApiKey).send([minimalEvent('MessageEvent')]).expect(200);
    const list = await client.request.get('/api/v1/conversations').set('X-Access-Token', accessToken).expect(200);
    expect(list.body.items.map((item: { id: string }) => item.id)).to.deep.equal([conversationId]);
    expect(await query('select owner_id from conversations where id = ?', [conversationId])).to.deep.equal([{ owner_id: userId }]);
  });

  it('can be rolled back (down): the single-user schema and rows come back, and migrating up again gives the same readings', async () => {
    await migrate(testDatabase().orm);
    const columns = async () =>
      query<{ table_name: string; column_name: string }>(
        "select table_name, column_name from information_schema.columns where table_schema = 'public' and table_name in ('users', 'credentials', 'credit_ledger', 'checkout_sessions', 'workspaces') order by 1, 2",
      );
    await testDatabase().orm.getMigrator().down({ to: LAST_BEFORE_ORGANIZATIONS });

    const names = (await columns()).map((row) => `${row.table_name}.${row.column_name}`);
    expect(names).to.include.members(['credit_ledger.user_id', 'checkout_sessions.user_id']);
    expect(names).not.to.include.members(['users.default_org_id']);
    expect(names.filter((name) => ['credentials.org_id', 'credit_ledger.owner_id', 'checkout_sessions.owner_id', 'workspaces.owner_id'].includes(name))).to.deep.equal([]);
    const tables = await query<{ name: string }>("select table_name as name from information_schema.tables where table_schema = 'public'");
    expect(tables.map((table) => table.name)).not.to.include.members(['organizations']);
    expect(tables.map((table) => table.name)).not.to.include('organization_members');
    const [foreignKeys] = await query<{ to_users: number }>(
      `select count(*)::int as to_users from pg_constraint con join pg_attribute a on a.attrelid = con.conrelid and a.attnum = con.conkey[1]
       where con.contype = 'f' and con.confrelid = 'users'::regclass and a.attname = 'owner_id'`,
    );
    expect(foreignKeys!.to_users, 'owner_id columns referencing users again').to.be.greaterThan(5);
    const ledger = await query<{ user_id: string }>('select user_id::text from credit_ledger');
    expect(ledger.map((row) => row.user_id)).to.have.members(recording.tables.credit_ledger!.map((row) => row.user_id as string));

    await migrate(testDatabase().orm);
    await expectSameReadings(client, ada, recording.readings.ada);
    await expectSameReadings(client, bo, recording.readings.bo);
  });
});
