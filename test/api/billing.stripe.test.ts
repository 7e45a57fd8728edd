import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { expect } from 'chai';
import Stripe from 'stripe';
import supertest from 'supertest';
import { MikroORM } from '@mikro-orm/postgresql';
import { loadConfig, ConfigError, type BillingConfig } from '../../src/config.ts';
import { createApp } from '../../src/app.ts';
import { createLogger } from '../../src/logger.ts';
import { ormOptions } from '../../src/db/database.ts';
import { testConfig, testDatabase } from '../helpers/hooks.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';

const CREATE = '/api/billing/create-checkout-session';
const WEBHOOK = '/api/billing/stripe/webhook';
const BASE_URL = 'https://billing.example.test';

interface RecordedRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  form: URLSearchParams;
}

/**
 * A stand-in for api.stripe.com on loopback: records what the SDK sends and answers as Stripe does
 * (or fails, as `failWith` says).
 */
class FakeStripeApi {
  readonly requests: RecordedRequest[] = [];
  failWith: { status: number; body: object } | undefined;
  private server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      this.requests.push({ method: req.method!, path: req.url!, headers: req.headers, form: new URLSearchParams(body) });
      res.setHeader('Content-Type', 'application/json');
      res.setHeader('Request-Id', `req_${randomBytes(6).toString('hex')}`);
      if (this.failWith) {
        res.statusCode = this.failWith.status;
        res.end(JSON.stringify(this.failWith.body));
        return;
      }
      const id = `cs_test_${randomBytes(12).toString('hex')}`;
      const form = new URLSearchParams(body);
      res.end(
        JSON.stringify({
          id,
          object: 'checkout.session',
          mode: form.get('mode'),
          url: `https://checkout.stripe.test/c/pay/${id}`,
          client_reference_id: form.get('client_reference_id'),
          payment_status: 'unpaid',
          status: 'open',
        }),
      );
    });
  });

  async start(): Promise<URL> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return new URL(`http://127.0.0.1:${(this.server.address() as AddressInfo).port}`);
  }

  stop(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

const signer = new Stripe('sk_test_signing_only');

function query<T>(sql: string, params: unknown[] = []): Promise<T[]> {
  return testDatabase().orm.em.getConnection().execute<T[]>(sql, params);
}

describe('billing through Stripe Checkout', () => {
  const secretKey = `sk_test_${randomBytes(24).toString('hex')}`;
  const webhookSecret = `whsec_${randomBytes(24).toString('hex')}`;
  const fake = new FakeStripeApi();
  let billing: BillingConfig;
  let client: TestApp;
  let user: UserFixture;
  /** Every response body the tests saw, to check that no secret is in any of them. */
  const responses: string[] = [];

  before(async () => {
    const apiBaseUrl = await fake.start();
    billing = {
      ...testConfig().billing,
      provider: 'stripe',
      publicBaseUrl: BASE_URL,
      sessionTtlMinutes: 30,
      maxAmountUsd: 1000,
      stripe: { secretKey, webhookSecret, apiBaseUrl },
    };
    client = await createTestApp({ billing });
  });
  after(async () => {
    await fake.stop();
  });
  beforeEach(async () => {
    user = await createUserFixture();
    fake.requests.length = 0;
    fake.failWith = undefined;
  });

  const keep = <T extends { text: string }>(response: T): T => {
    responses.push(response.text);
    return response;
  };

  /** Starts a checkout of `amount` USD; returns our session row. */
  async function startCheckout(amount: number) {
    const response = keep(await client.request.post(CREATE).set('X-Access-Token', user.accessToken).send({ amount }).expect(200));
    const [row] = await query<{ id: string; provider_session_id: string; expires_at: string; redirect_url: string }>(
      'select id, provider_session_id, expires_at, redirect_url from checkout_sessions where redirect_url = ?',
      [response.body.redirect_url],
    );
    return { ...row!, redirectUrl: response.body.redirect_url as string };
  }

  function checkoutEvent(
    stripeSessionId: string,
    amountUsd: number,
    options: { type?: string; created?: number; paymentStatus?: string; currency?: string; extra?: object } = {},
  ) {
    return JSON.stringify({
      id: `evt_${randomBytes(10).toString('hex')}`,
      object: 'event',
      type: options.type ?? 'checkout.session.completed',
      created: options.created ?? Math.floor(Date.now() / 1000),
      livemode: false,
      data: {
        object: {
          id: stripeSessionId,
          object: 'checkout.session',
          mode: 'payment',
          payment_status: options.paymentStatus ?? 'paid',
          amount_total: amountUsd * 100,
          currency: options.currency ?? 'usd',
          ...options.extra,
        },
      },
    });
  }

  const sign = (payload: string, options: { secret?: string; timestamp?: number } = {}) =>
    signer.webhooks.generateTestHeaderString({
      payload,
      secret: options.secret ?? webhookSecret,
      ...(options.timestamp !== undefined ? { timestamp: options.timestamp } : {}),
    });

  const deliver = async (payload: string, signature: string | undefined, app: TestApp['request'] = client.request) => {
    const request = app.post(WEBHOOK).set('Content-Type', 'application/json');
    if (signature !== undefined) request.set('Stripe-Signature', signature);
    return keep(await request.send(payload));
  };

  const balance = async () =>
    (keep(await client.request.get('/api/billing/credits').set('X-Access-Token', user.accessToken).expect(200)).body as { balance_usd: number })
      .balance_usd;
  const status = async (id: string) => (await query<{ status: string }>('select status from checkout_sessions where id = ?', [id]))[0]!.status;

  describe('POST /api/billing/create-checkout-session', () => {
    it("creates a Stripe Checkout session through the SDK and answers with Stripe's URL", async () => {
      const session = await startCheckout(25);
      expect(session.redirectUrl).to.match(/^https:\/\/checkout\.stripe\.test\/c\/pay\/cs_test_/);
      expect(session.redirectUrl).to.equal(session.redirect_url);
      expect(fake.requests).to.have.length(1);
      const [sent] = fake.requests;
      expect(sent!.method).to.equal('POST');
      expect(sent!.path).to.equal('/v1/checkout/sessions');
      expect(sent!.headers.authorization).to.equal(`Bearer ${secretKey}`);
      expect(sent!.headers['content-type']).to.match(/^application\/x-www-form-urlencoded/);
      expect(sent!.headers['idempotency-key']).to.equal(`checkout-${session.id}`);
      const form = Object.fromEntries(sent!.form);
      expect(form).to.include({
        mode: 'payment',
        'line_items[0][quantity]': '1',
        'line_items[0][price_data][currency]': 'usd',
        'line_items[0][price_data][unit_amount]': '2500',
        success_url: `${BASE_URL}/billing/checkout/${session.id}?outcome=success`,
        cancel_url: `${BASE_URL}/billing/checkout/${session.id}?outcome=cancel`,
        client_reference_id: session.id,
        'metadata[checkout_session_id]': session.id,
        'metadata[owner_id]': user.userId,
        expires_at: String(new Date(session.expires_at).getTime() / 1000),
      });
      expect(session.provider_session_id).to.equal(new URL(session.redirectUrl).pathname.split('/').pop());
    });

    it('answers 503 and stores nothing when Stripe fails, without logging what Stripe said', async () => {
      fake.failWith = {
        status: 401,
        body: { error: { type: 'invalid_request_error', message: `Invalid API Key provided: ${secretKey}` } },
      };
      const response = keep(await client.request.post(CREATE).set('X-Access-Token', user.accessToken).send({ amount: 5 }).expect(503));
      expect(response.body).to.deep.equal({ detail: 'The payment provider is unavailable, please try again later.' });
      expect(await query('select 1 from checkout_sessions')).to.have.length(0);
      expect(client.logs.join('')).to.include('stripe checkout session not created');
    });

    it('answers 503 when Stripe cannot be reached', async () => {
      const unreachable = await createTestApp({
        billing: { ...billing, stripe: { ...billing.stripe!, apiBaseUrl: new URL('http://127.0.0.1:9') } },
      });
      const response = keep(await unreachable.request.post(CREATE).set('X-Access-Token', user.accessToken).send({ amount: 5 }).expect(503));
      expect(response.body.detail).to.be.a('string');
      expect(unreachable.logs.join('')).to.not.include(secretKey);
    });
  });

  describe('POST /api/billing/stripe/webhook', () => {
    it('completes the session on checkout.session.completed and credits the balance', async () => {
      const session = await startCheckout(40);
      const payload = checkoutEvent(session.provider_session_id, 40);
      const response = await deliver(payload, sign(payload));
      expect(response.status).to.equal(200);
      expect(response.body).to.deep.equal({ success: true });
      expect(await status(session.id)).to.equal('completed');
      expect(await balance()).to.equal(40);
    });

    it('credits once when the same event is replayed', async () => {
      const session = await startCheckout(11);
      const payload = checkoutEvent(session.provider_session_id, 11);
      const signature = sign(payload);
      for (let i = 0; i < 3; i++) expect((await deliver(payload, signature)).status).to.equal(200);
      // Stripe's redelivery is a new signature over the same event.
      expect((await deliver(payload, sign(payload))).status).to.equal(200);
      expect(await balance()).to.equal(11);
    });

    it('credits once when duplicated deliveries race, on two server instances with their own pools', async () => {
      const secondOrm = await MikroORM.init(ormOptions(testDatabase().url, undefined, 5));
      try {
        const { app: second } = await createApp({
          config: { ...testConfig(), billing },
          logger: createLogger('silent'),
          orm: secondOrm,
          database: { isReachable: async () => true },
        });
        const secondClient = supertest(second.callback());
        const session = await startCheckout(9);
        const payload = checkoutEvent(session.provider_session_id, 9);
        const deliveries = [...Array(30)].map((_, i) => deliver(payload, sign(payload), i % 2 ? secondClient : client.request));
        const results = await Promise.all(deliveries);
        expect(results.every((r) => r.status === 200)).to.equal(true);
        expect(await query('select 1 from credit_ledger where checkout_session_id = ?', [session.id])).to.have.length(1);
        expect(await balance()).to.equal(9);
      } finally {
        await secondOrm.close(true);
      }
    });

    it('answers 400 and credits nothing for a missing, wrong, stale or tampered signature', async () => {
      const session = await startCheckout(50);
      const payload = checkoutEvent(session.provider_session_id, 50);
      const missing = await deliver(payload, undefined);
      expect(missing.status).to.equal(400);
      expect(missing.body).to.deep.equal({ detail: 'Missing Stripe-Signature header' });
      const wrongSecret = await deliver(payload, sign(payload, { secret: `whsec_${randomBytes(24).toString('hex')}` }));
      expect(wrongSecret.status).to.equal(400);
      const stale = await deliver(payload, sign(payload, { timestamp: Math.floor(Date.now() / 1000) - 600 }));
      expect(stale.status).to.equal(400);
      const garbage = await deliver(payload, 'not a signature');
      expect(garbage.status).to.equal(400);
      // Signed as sent, then changed: one more space is enough.
      const tampered = await deliver(payload.replace('"paid"', ' "paid"'), sign(payload));
      expect(tampered.status).to.equal(400);
      expect(await status(session.id)).to.equal('pending');
      expect(await balance()).to.equal(0);
    });

    it('verifies the exact bytes received, whatever their formatting or escapes', async () => {
      const session = await startCheckout(13);
      const payload = checkoutEvent(session.provider_session_id, 13, {
        extra: { customer_details: { name: 'Zoë \u0000 \ud800', email: 'zoe@example.com' }, amount_subtotal: 1300.0 },
      })
        .replace('"amount_subtotal":1300', '"amount_subtotal" : 1300.00')
        .replace(/\n?$/, '\n');
      const response = await deliver(payload, sign(payload));
      expect(response.status, response.text).to.equal(200);
      expect(await balance()).to.equal(13);
    });

    it('acknowledges (200) and ignores other event types and sessions it does not know', async () => {
      const session = await startCheckout(14);
      const other = JSON.stringify({ id: 'evt_1', object: 'event', type: 'customer.created', created: 1, data: { object: { id: 'cus_1' } } });
      expect((await deliver(other, sign(other))).status).to.equal(200);
      const unknown = checkoutEvent(`cs_test_${randomBytes(8).toString('hex')}`, 14);
      expect((await deliver(unknown, sign(unknown))).status).to.equal(200);
      expect(await status(session.id)).to.equal('pending');
      expect(await balance()).to.equal(0);
    });

    it('does not credit a completion whose amount, currency or payment status differs from the session', async () => {
      const session = await startCheckout(20);
      for (const payload of [
        checkoutEvent(session.provider_session_id, 2),
        checkoutEvent(session.provider_session_id, 20, { currency: 'eur' }),
        checkoutEvent(session.provider_session_id, 20, { paymentStatus: 'unpaid' }),
      ]) {
        expect((await deliver(payload, sign(payload))).status).to.equal(200);
      }
      expect(await status(session.id)).to.equal('pending');
      expect(await balance()).to.equal(0);
      // A delayed payment method settles later.
      const settled = checkoutEvent(session.provider_session_id, 20, { type: 'checkout.session.async_payment_succeeded' });
      expect((await deliver(settled, sign(settled))).status).to.equal(200);
      expect(await balance()).to.equal(20);
    });

    it('marks the session expired on checkout.session.expired; it cannot be completed afterwards', async () => {
      const session = await startCheckout(16);
      const expired = checkoutEvent(session.provider_session_id, 16, { type: 'checkout.session.expired', paymentStatus: 'unpaid' });
      expect((await deliver(expired, sign(expired))).status).to.equal(200);
      expect(await status(session.id)).to.equal('expired');
      await query("update checkout_sessions set expires_at = now() - interval '1 minute' where id = ?", [session.id]);
      const late = checkoutEvent(session.provider_session_id, 16);
      expect((await deliver(late, sign(late))).status).to.equal(200);
      expect(await status(session.id)).to.equal('expired');
      expect(await balance()).to.equal(0);
    });

    it('credits a payment made before the expiry even when Stripe delivers it after', async () => {
      const session = await startCheckout(17);
      const paidAt = Math.floor(Date.now() / 1000) - 120;
      await query("update checkout_sessions set expires_at = now() - interval '1 minute' where id = ?", [session.id]);
      expect((await client.request.get('/api/billing/credits').set('X-Access-Token', user.accessToken)).body.sessions[0].status).to.equal(
        'expired',
      );
      // Stripe retries a delivery for days; the event keeps the time it was created.
      const payload = checkoutEvent(session.provider_session_id, 17, { created: paidAt });
      expect((await deliver(payload, sign(payload))).status).to.equal(200);
      expect(await status(session.id)).to.equal('completed');
      expect(await balance()).to.equal(17);
    });

    it('answers 422 for a body that is not JSON, before looking at the signature', async () => {
      const response = await deliver('{"id":', sign('{"id":'));
      expect(response.status).to.equal(422);
    });

    it('answers 404 when Stripe is not configured', async () => {
      const local = await createTestApp({ billing: { ...testConfig().billing, provider: 'local' } });
      const payload = checkoutEvent('cs_test_x', 1);
      const response = await local.request.post(WEBHOOK).set('Stripe-Signature', sign(payload)).set('Content-Type', 'application/json').send(payload);
      expect(response.status).to.equal(404);
    });

    it('the checkout page shows a Stripe session’s state without Confirm or Cancel buttons', async () => {
      const session = await startCheckout(18);
      const cancelled = keep(await client.request.get(`/billing/checkout/${session.id}?outcome=cancel`).expect(200));
      expect(cancelled.text).to.include('data-status="pending"').and.include(`href="${session.redirectUrl}"`).and.not.include('<form');
      keep(await client.request.post(`/billing/checkout/${session.id}/confirm`).expect(409));
      expect(await balance()).to.equal(0);
    });
  });

  describe('secrecy (after the tests above)', () => {
    it('no Stripe secret reaches a response or a log line', async () => {
      // Everything the tests above answered and logged, failures of Stripe included.
      expect(responses.length).to.be.greaterThan(20);
      for (const secret of [secretKey, webhookSecret, secretKey.slice(8), webhookSecret.slice(6)]) {
        expect(responses.join('\n')).to.not.include(secret);
        expect(client.logs.join('')).to.not.include(secret);
      }
      expect(client.logs.length).to.be.greaterThan(20);
    });
  });
});

describe('billing configuration', () => {
  const env = { DATA_DIR: '.data/unused' };

  it('uses the local checkout without a Stripe key, and Stripe with one', () => {
    expect(loadConfig(env).billing).to.include({ provider: 'local', maxAmountUsd: 10_000, sessionTtlMinutes: 60 });
    const stripe = loadConfig({ ...env, STRIPE_SECRET_KEY: 'sk_test_1', STRIPE_WEBHOOK_SECRET: 'whsec_1' }).billing;
    expect(stripe.provider).to.equal('stripe');
    expect(stripe.stripe).to.deep.include({ secretKey: 'sk_test_1', webhookSecret: 'whsec_1' });
    expect(stripe.stripe!.apiBaseUrl).to.equal(undefined);
    const standIn = loadConfig({ ...env, STRIPE_SECRET_KEY: 'sk_test_1', STRIPE_WEBHOOK_SECRET: 'whsec_1', STRIPE_API_BASE_URL: 'http://127.0.0.1:12111' });
    expect(standIn.billing.stripe!.apiBaseUrl!.href).to.equal('http://127.0.0.1:12111/');
    const forcedLocal = loadConfig({ ...env, STRIPE_SECRET_KEY: 'sk_test_1', BILLING_PROVIDER: 'local' }).billing;
    expect(forcedLocal.provider).to.equal('local');
    expect(forcedLocal.stripe).to.equal(undefined);
  });

  it('refuses Stripe without a webhook secret, or with a lifetime Stripe does not accept', () => {
    expect(() => loadConfig({ ...env, STRIPE_SECRET_KEY: 'sk_test_1' })).to.throw(ConfigError, /STRIPE_WEBHOOK_SECRET/);
    expect(() => loadConfig({ ...env, BILLING_PROVIDER: 'stripe' })).to.throw(ConfigError, /STRIPE_SECRET_KEY/);
    expect(() =>
      loadConfig({ ...env, STRIPE_SECRET_KEY: 'sk_test_1', STRIPE_WEBHOOK_SECRET: 'whsec_1', CHECKOUT_SESSION_TTL_MINUTES: '10' }),
    ).to.throw(ConfigError, /CHECKOUT_SESSION_TTL_MINUTES/);
    expect(loadConfig({ ...env, CHECKOUT_SESSION_TTL_MINUTES: '10' }).billing.sessionTtlMinutes).to.equal(10);
  });

  it('derives the public base URL from HOST and PORT unless PUBLIC_BASE_URL is set', () => {
    expect(loadConfig({ ...env, PORT: '8080' }).billing.publicBaseUrl).to.equal('http://127.0.0.1:8080');
    expect(loadConfig({ ...env, HOST: '0.0.0.0', PORT: '8080' }).billing.publicBaseUrl).to.equal('http://localhost:8080');
    expect(loadConfig({ ...env, PUBLIC_BASE_URL: 'https://app.example.com/' }).billing.publicBaseUrl).to.equal('https://app.example.com');
    expect(() => loadConfig({ ...env, PUBLIC_BASE_URL: 'app.example.com' })).to.throw(ConfigError, /PUBLIC_BASE_URL/);
    expect(() => loadConfig({ ...env, BILLING_MAX_AMOUNT_USD: '0' })).to.throw(ConfigError, /BILLING_MAX_AMOUNT_USD/);
  });
});

