import { createHash, randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';
import { specOperations } from '../helpers/spec-operations.ts';
import { IdempotencyRecordRetention } from '../../src/retention/idempotency-records.ts';
import { createLogger } from '../../src/logger.ts';

const CHECKOUT = '/api/billing/create-checkout-session';
const sql = <T>(text: string, values: unknown[] = []) => testDatabase().orm.em.getConnection().execute<T[]>(text, values);
const countOf = async (table: string, where = 'true', values: unknown[] = []) => (await sql<{ n: number }>(`select count(*)::int as n from ${table} where ${where}`, values))[0]!.n;

describe('idempotency keys: the spec', () => {
  it('every POST that creates something declares the Idempotency-Key parameter and documents 409 and 422', () => {
    const creates = specOperations().filter((op) => op.method === 'POST' && /^create/.test(op.operationId));
    // A stream ticket is single-use and short-lived: a retry simply gets a new one.
    const expected = creates.filter((op) => op.operationId !== 'createStreamTicket');
    const declaring = specOperations().filter((op) => op.parameters.some((p) => p.in === 'header' && p.name === 'Idempotency-Key'));
    expect(declaring.map((op) => op.operationId).sort()).to.deep.equal(expected.map((op) => op.operationId).sort());
    expect(declaring.map((op) => op.operationId)).to.include.members(['createCheckoutSession', 'createKey', 'createUser', 'createUserKey', 'createWebhookEndpoint']);
  });
});

describe('idempotency keys: POST with Idempotency-Key', function () {
  this.timeout(30_000);
  let client: TestApp;
  let user: UserFixture;

  before(async () => {
    client = await createTestApp();
  });

  beforeEach(async () => {
    user = await createUserFixture();
  });

  const checkout = (key: string | undefined, amount: number, accessToken = user.accessToken) => {
    const request = client.request.post(CHECKOUT).set('X-Access-Token', accessToken);
    if (key !== undefined) request.set('Idempotency-Key', key);
    return request.send({ amount });
  };

  it('a double-clicked "Buy credits" makes one checkout session: the same key and body answer the first response again', async () => {
    const key = randomUUID();
    const first = await checkout(key, 25).expect(200);
    expect(first.headers['idempotent-replayed']).to.equal(undefined);
    const again = await checkout(key, 25).expect(200);
    expect(again.headers['idempotent-replayed']).to.equal('true');
    expect(again.headers['content-type']).to.match(/^application\/json/);
    expect(again.body).to.deep.equal(first.body);
    expect(await countOf('checkout_sessions', 'owner_id = ?', [user.userId])).to.equal(1);
    // Without a key every request creates.
    await checkout(undefined, 25).expect(200);
    await checkout(undefined, 25).expect(200);
    expect(await countOf('checkout_sessions', 'owner_id = ?', [user.userId])).to.equal(3);
  });

  it('the same key with another body is a 422 naming the header, and creates nothing', async () => {
    const key = randomUUID();
    await checkout(key, 25).expect(200);
    const other = await checkout(key, 26).expect(422);
    expect(other.body.detail[0].loc).to.deep.equal(['header', 'idempotency-key']);
    expect(other.body.detail[0].type).to.equal('idempotency_key_reused');
    expect(other.body.detail[0].msg).to.include('Idempotency-Key');
    expect(await countOf('checkout_sessions', 'owner_id = ?', [user.userId])).to.equal(1);
  });

  it('a duplicate while the first is in flight gets 409 with Retry-After; concurrent duplicates make one session', async () => {
    // The first request, claimed and not yet answered (as another instance would hold it).
    const key = randomUUID();
    const body = JSON.stringify({ amount: 25 });
    const hash = createHash('sha256').update(`POST ${CHECKOUT}\n`).update(body).digest();
    await sql(
      `insert into idempotency_records (owner_id, idempotency_key, operation_id, request_hash, expires_at) values (?, ?, 'createCheckoutSession', ?, now() + interval '1 day')`,
      [user.userId, key, hash],
    );
    const busy = await client.request.post(CHECKOUT).set('X-Access-Token', user.accessToken).set('Idempotency-Key', key).set('Content-Type', 'application/json').send(body).expect(409);
    expect(busy.headers['retry-after']).to.equal('1');
    expect(busy.body.detail).to.include('still being processed');
    expect(await countOf('checkout_sessions', 'owner_id = ?', [user.userId])).to.equal(0);

    // Really concurrent: one creates, the others wait for nothing (409) or get its response again.
    const concurrentKey = randomUUID();
    const answers = await Promise.all([1, 2, 3, 4].map(() => checkout(concurrentKey, 40)));
    const firsts = answers.filter((a) => a.status === 200 && a.headers['idempotent-replayed'] === undefined);
    expect(firsts).to.have.length(1);
    for (const answer of answers.filter((a) => a !== firsts[0])) {
      expect(`${answer.status} ${answer.headers['idempotent-replayed']}`).to.be.oneOf(['409 undefined', '200 true']);
    }
    expect(await countOf('checkout_sessions', 'owner_id = ? and amount_usd = 40', [user.userId])).to.equal(1);
  });

  it('keys belong to the credential owner: another user with the same key creates their own', async () => {
    const key = randomUUID();
    const other = await createUserFixture();
    const mine = await checkout(key, 25).expect(200);
    const theirs = await checkout(key, 25, other.accessToken).expect(200);
    expect(theirs.headers['idempotent-replayed']).to.equal(undefined);
    expect(theirs.body.redirect_url).to.not.equal(mine.body.redirect_url);
  });

  it('accepts the key as a structured-field string ("…") too, the same key as bare', async () => {
    const key = randomUUID();
    await checkout(key, 25).expect(200);
    const quoted = await checkout(`"${key}"`, 25).expect(200);
    expect(quoted.headers['idempotent-replayed']).to.equal('true');
  });

  it('a created key is answered again with its secret, stored encrypted, and no second key is made', async () => {
    const key = randomUUID();
    const create = () => client.request.post('/api/keys').set('X-Access-Token', user.accessToken).set('Idempotency-Key', key).send({ kind: 'session_api_key', name: 'agent' });
    const first = await create().expect(201);
    rememberSecret(first.body.secret);
    const again = await create().expect(201);
    expect(again.headers['idempotent-replayed']).to.equal('true');
    expect(again.headers['cache-control']).to.equal('no-store');
    expect(again.body).to.deep.equal(first.body);
    expect(await countOf('credentials', `user_id = ? and name = 'agent'`, [user.userId])).to.equal(1);
    const stored = await sql<{ response: string }>('select response from idempotency_records where owner_id = ?', [user.userId]);
    expect(stored).to.have.length(1);
    expect(stored[0]!.response).to.match(/^v1:/);
    expect(stored[0]!.response).to.not.include(first.body.secret);
    expect(stored[0]!.response).to.not.include(Buffer.from(first.body.secret).toString('base64').slice(0, 16));
  });

  it('an admin creating a user and their key: replayed, one user, one key', async () => {
    const admin = await createUserFixture({ superAdmin: true });
    const as = (path: string, body: object, key: string) => client.request.post(path).set('X-Access-Token', admin.accessToken).set('Idempotency-Key', key).send(body);
    const userKey = randomUUID();
    const created = await as('/api/admin/users', { email: 'grace@acme.example' }, userKey).expect(201);
    expect((await as('/api/admin/users', { email: 'grace@acme.example' }, userKey).expect(201)).headers['idempotent-replayed']).to.equal('true');
    const keyKey = randomUUID();
    const issued = await as(`/api/admin/users/${created.body.user_id}/keys`, { kind: 'access_token', name: 'first token' }, keyKey).expect(201);
    rememberSecret(issued.body.secret);
    const replayed = await as(`/api/admin/users/${created.body.user_id}/keys`, { kind: 'access_token', name: 'first token' }, keyKey).expect(201);
    expect(replayed.body.secret).to.equal(issued.body.secret);
    expect(await countOf('users', `email = 'grace@acme.example'`)).to.equal(1);
    expect(await countOf('credentials', 'user_id = ?', [created.body.user_id])).to.equal(1);
  });

  it('keeps only a success: after an error the key is free again', async () => {
    const admin = await createUserFixture({ superAdmin: true });
    const key = randomUUID();
    await client.request.post(`/api/admin/users/${randomUUID()}/keys`).set('X-Access-Token', admin.accessToken).set('Idempotency-Key', key).send({ kind: 'access_token', name: 'first token' }).expect(404);
    expect(await countOf('idempotency_records')).to.equal(0);
  });

  it('after 24 h the key is new again, and the sweep deletes expired records', async () => {
    const key = randomUUID();
    await checkout(key, 25).expect(200);
    await sql(`update idempotency_records set expires_at = now() - interval '1 second'`);
    const later = await checkout(key, 25).expect(200);
    expect(later.headers['idempotent-replayed']).to.equal(undefined);
    expect(await countOf('checkout_sessions', 'owner_id = ?', [user.userId])).to.equal(2);
    await sql(`update idempotency_records set expires_at = now() - interval '1 second'`);
    const deleted = await new IdempotencyRecordRetention(testDatabase().orm.em, createLogger('silent')).sweep();
    expect(deleted).to.equal(1);
    expect(await countOf('idempotency_records')).to.equal(0);
  });

  it('refuses a key longer than 257 characters (422 naming the header)', async () => {
    const tooLong = await checkout('k'.repeat(258), 25).expect(422);
    expect(tooLong.body.detail[0].loc).to.deep.equal(['header', 'idempotency-key']);
  });
});
