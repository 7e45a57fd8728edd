import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { testConfig, testDatabase } from '../helpers/hooks.ts';
import { createTestApp, RATE_LIMITS_OFF, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';

const CREATE = '/api/billing/create-checkout-session';
const CREDITS = '/api/billing/credits';
const BASE_URL = 'https://billing.example.test:8443';
const MAX_AMOUNT = 500;

interface SessionRow {
  id: string;
  owner_id: string;
  amount_usd: number;
  provider: string;
  provider_session_id: string;
  status: string;
  created_at: string;
  expires_at: string;
  completed_at: string | null;
}

function query<T>(sql: string, params: unknown[] = []): Promise<T[]> {
  return testDatabase().orm.em.getConnection().execute<T[]>(sql, params);
}

const sessionRow = async (id: string) => (await query<SessionRow>('select * from checkout_sessions where id = ?', [id]))[0];
const ledgerRows = (userId: string) => query<{ checkout_session_id: string; amount_usd: number }>('select * from credit_ledger where owner_id = ?', [userId]);

/** The session id at the end of a local checkout's redirect URL. */
const sessionIdOf = (redirectUrl: string) => new URL(redirectUrl).pathname.split('/').pop()!;

describe('billing: E4 and the local checkout', () => {
  let client: TestApp;
  let user: UserFixture;
  before(async () => {
    client = await createTestApp({
      billing: { ...testConfig().billing, provider: 'local', maxAmountUsd: MAX_AMOUNT, publicBaseUrl: BASE_URL, sessionTtlMinutes: 45 },
      // The checkout pages carry no credential: this file's many confirms and cancels would share 127.0.0.1's writes bucket.
      rateLimits: RATE_LIMITS_OFF,
    });
  });
  beforeEach(async () => {
    user = await createUserFixture();
  });

  const create = (body: unknown, token = user.accessToken) => client.request.post(CREATE).set('X-Access-Token', token).send(body as object);
  const startCheckout = async (amount: number, token = user.accessToken) => {
    const response = await create({ amount }, token).expect(200);
    return sessionIdOf(response.body.redirect_url);
  };
  const credits = async (token = user.accessToken) => (await client.request.get(CREDITS).set('X-Access-Token', token).expect(200)).body;
  const confirm = (id: string) => client.request.post(`/billing/checkout/${id}/confirm`).type('form').send('');
  const cancel = (id: string) => client.request.post(`/billing/checkout/${id}/cancel`).type('form').send('');

  describe('POST /api/billing/create-checkout-session', () => {
    it('returns 200 with an absolute redirect URL to the local checkout page and stores a pending session', async () => {
      const before = Date.now();
      const response = await create({ amount: 25 }).expect(200);
      expect(Object.keys(response.body)).to.deep.equal(['redirect_url']);
      const url = new URL(response.body.redirect_url);
      expect(url.origin).to.equal(BASE_URL);
      expect(url.pathname).to.match(/^\/billing\/checkout\/[0-9a-f-]{36}$/);
      const row = await sessionRow(sessionIdOf(response.body.redirect_url));
      expect(row).to.include({ owner_id: user.userId, amount_usd: 25, provider: 'local', status: 'pending', completed_at: null });
      const ttlMs = new Date(row!.expires_at).getTime() - before;
      expect(ttlMs).to.be.within(45 * 60_000 - 1000, 45 * 60_000 + 5000);
    });

    it('accepts the configured maximum', async () => {
      await create({ amount: MAX_AMOUNT }).expect(200);
    });

    it('returns 401 without an access token, and with an unknown one', async () => {
      const missing = await client.request.post(CREATE).send({ amount: 10 }).expect(401);
      expect(missing.body.detail).to.be.a('string');
      await create({ amount: 10 }, 'not-a-token').expect(401);
      expect(await query('select 1 from checkout_sessions')).to.have.length(0);
    });

    for (const [label, body, type] of [
      ['0', { amount: 0 }, 'greater_than_equal'],
      ['a negative amount', { amount: -5 }, 'greater_than_equal'],
      ['10.5', { amount: 10.5 }, 'int_type'],
      ['the string "10"', { amount: '10' }, 'int_type'],
      ['a missing amount', {}, 'missing'],
      ['an amount above the configured maximum', { amount: MAX_AMOUNT + 1 }, 'less_than_equal'],
    ] as const) {
      it(`returns 422 for ${label}`, async () => {
        const response = await create(body).expect(422);
        expect(response.body.detail).to.have.length(1);
        expect(response.body.detail[0]).to.include({ type });
        expect(response.body.detail[0].loc).to.deep.equal(['body', 'amount']);
        expect(await query('select 1 from checkout_sessions')).to.have.length(0);
      });
    }

    it('returns 422 for unknown properties and for a body that is not an object', async () => {
      await create({ amount: 10, currency: 'eur' }).expect(422);
      await create([10]).expect(422);
    });
  });

  describe('GET /api/billing/credits', () => {
    it('returns 401 without an access token', async () => {
      await client.request.get(CREDITS).expect(401);
    });

    it('lists at most `limit` sessions, newest first, and answers 422 for a limit out of range', async () => {
      for (const amount of [1, 2, 3]) await startCheckout(amount);
      await query("update checkout_sessions set created_at = now() - make_interval(secs => amount_usd) where owner_id = ?", [user.userId]);
      const page = (await client.request.get(`${CREDITS}?limit=2`).set('X-Access-Token', user.accessToken).expect(200)).body;
      expect(page.sessions.map((s: { amount_usd: number }) => s.amount_usd)).to.deep.equal([1, 2]);
      for (const limit of ['0', '101', 'x']) {
        const response = await client.request.get(`${CREDITS}?limit=${limit}`).set('X-Access-Token', user.accessToken).expect(422);
        expect(response.body.detail[0].loc).to.deep.equal(['query', 'limit']);
      }
    });

    it('starts at zero and lists only the caller’s sessions, newest first', async () => {
      const other = await createUserFixture();
      expect(await credits()).to.deep.equal({
        purchased_usd: 0,
        purchased_micro_usd: 0,
        spent_usd: 0,
        spent_micro_usd: 0,
        balance_usd: 0,
        balance_micro_usd: 0,
        overdrawn: false,
        sessions: [],
      });
      const first = await startCheckout(5);
      const second = await startCheckout(7);
      await startCheckout(9, other.accessToken);
      const body = await credits();
      expect(body.balance_usd).to.equal(0);
      expect(body.sessions.map((s: { id: string }) => s.id)).to.have.members([first, second]);
      expect(body.sessions[0]).to.have.all.keys('id', 'amount_usd', 'provider', 'status', 'created_at', 'expires_at', 'completed_at');
      expect(body.sessions.every((s: { status: string }) => s.status === 'pending')).to.equal(true);
    });
  });

  describe('local checkout page', () => {
    it('serves an HTML page with Confirm and Cancel forms and a strict CSP', async () => {
      const id = await startCheckout(12);
      const page = await client.request.get(`/billing/checkout/${id}`).expect(200);
      expect(page.headers['content-type']).to.match(/^text\/html/);
      expect(page.headers['content-security-policy']).to.include("default-src 'none'").and.include("form-action 'self'");
      expect(page.headers['referrer-policy']).to.equal('no-referrer');
      expect(page.headers['cache-control']).to.equal('no-store');
      expect(page.text).to.include('$12.00');
      expect(page.text).to.include(`action="/billing/checkout/${id}/confirm"`).and.include(`action="/billing/checkout/${id}/cancel"`);
      expect(page.text).to.not.include('<script');
    });

    it('returns 404 for an unknown session and 422 for an id that is not a UUID', async () => {
      await client.request.get(`/billing/checkout/${randomUUID()}`).expect(404);
      await confirm(randomUUID()).expect(404);
      await client.request.get('/billing/checkout/nope').expect(422);
    });

    it('confirm credits the balance and redirects (303) back to the page, which shows it paid', async () => {
      const id = await startCheckout(30);
      const response = await confirm(id).expect(303);
      expect(response.headers.location).to.equal(`/billing/checkout/${id}`);
      const row = await sessionRow(id);
      expect(row!.status).to.equal('completed');
      expect(row!.completed_at).to.not.equal(null);
      const body = await credits();
      expect(body.balance_usd).to.equal(30);
      expect(body.sessions[0]).to.include({ id, status: 'completed', amount_usd: 30 });
      const page = await client.request.get(`/billing/checkout/${id}`).expect(200);
      expect(page.text).to.include('data-status="completed"').and.not.include('action=');
    });

    it('credits once when confirmed again (a double click)', async () => {
      const id = await startCheckout(8);
      await confirm(id).expect(303);
      await confirm(id).expect(303);
      expect(await ledgerRows(user.userId)).to.have.length(1);
      expect((await credits()).balance_usd).to.equal(8);
    });

    it('credits once when many confirmations race', async () => {
      const id = await startCheckout(3);
      const other = await startCheckout(4);
      const responses = await Promise.all([...Array(25)].flatMap(() => [confirm(id), confirm(other)]));
      expect(responses.map((r) => r.status)).to.satisfy((statuses: number[]) => statuses.every((s) => s === 303));
      expect(await ledgerRows(user.userId)).to.have.length(2);
      expect((await credits()).balance_usd).to.equal(7);
    });

    it('a cancelled session cannot be completed (409) and credits nothing', async () => {
      const id = await startCheckout(15);
      await cancel(id).expect(303);
      await cancel(id).expect(303);
      expect((await sessionRow(id))!.status).to.equal('cancelled');
      const refused = await confirm(id).expect(409);
      expect(refused.headers['content-type']).to.match(/^text\/html/);
      expect(refused.text).to.include('data-status="cancelled"');
      expect((await credits()).balance_usd).to.equal(0);
    });

    it('a completed session cannot be cancelled (409) and stays credited', async () => {
      const id = await startCheckout(6);
      await confirm(id).expect(303);
      await cancel(id).expect(409);
      expect((await sessionRow(id))!.status).to.equal('completed');
      expect((await credits()).balance_usd).to.equal(6);
    });

    it('an expired session cannot be completed or cancelled (409), and is listed as expired', async () => {
      const id = await startCheckout(20);
      const fresh = await startCheckout(21);
      await query("update checkout_sessions set expires_at = now() - interval '1 second' where id = ?", [id]);
      const refused = await confirm(id).expect(409);
      expect(refused.text).to.include('data-status="expired"');
      await cancel(id).expect(409);
      const body = await credits();
      expect(body.balance_usd).to.equal(0);
      const statuses = Object.fromEntries(body.sessions.map((s: { id: string; status: string }) => [s.id, s.status]));
      expect(statuses).to.deep.equal({ [id]: 'expired', [fresh]: 'pending' });
      expect((await sessionRow(id))!.status).to.equal('expired');
    });
  });
});
