import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { testConfig } from '../helpers/hooks.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { postEvents } from '../helpers/webhook.ts';
import { credentialHeaders, fillPath, schemesOf, specOperations, TEST_METRICS_TOKEN, type SpecOperation } from '../helpers/spec-operations.ts';

/**
 * Pages for people (`x-browser-page: true` in the spec) answer their page whatever query a link
 * carries (a newsletter's `utm_source`, a cache-buster's `v`), where API operations keep refusing
 * unknown query parameters (422). Both lists come from `spec/openapi.yaml`: a page added to the
 * spec is covered here without touching this file, or fails loudly for want of a path value.
 */
const operations = specOperations();
const pages = operations.filter((op) => op.browserPage);
const UNKNOWN_QUERY = 'utm_source=newsletter&utm_medium=email&x=1&v=2&ticket=';

describe('x-browser-page operations ignore query parameters they do not declare', () => {
  let client: TestApp;
  let user: UserFixture;
  before(async () => {
    client = await createTestApp({
      metricsToken: TEST_METRICS_TOKEN,
      billing: { ...testConfig().billing, provider: 'local', publicBaseUrl: 'http://127.0.0.1:3000' },
    });
  });
  beforeEach(async () => {
    user = await createUserFixture();
  });

  /** A fresh value for each path parameter a page declares: its own checkout session for each request. */
  async function pathOf(operation: SpecOperation): Promise<string> {
    const values: Record<string, string> = {};
    for (const parameter of operation.parameters.filter((p) => p.in === 'path')) {
      if (parameter.name === 'session_id') {
        const created = await client.request
          .post('/api/billing/create-checkout-session')
          .set('X-Access-Token', user.accessToken)
          .send({ amount: 5 })
          .expect(200);
        values.session_id = new URL(created.body.redirect_url).pathname.split('/').pop()!;
      } else if (parameter.name === 'conversation_id') {
        values.conversation_id = randomUUID();
      } else if (parameter.name === 'token') {
        const conversationId = randomUUID();
        await postEvents(client, user.sessionApiKey, conversationId, [minimalEvent('MessageEvent')]).expect(200);
        const link = await client.request
          .post(`/api/v1/conversations/${conversationId}/share-links`)
          .set('X-Access-Token', user.accessToken)
          .send({})
          .expect(201);
        values.token = new URL(link.body.url).pathname.split('/').pop()!;
      } else {
        throw new Error(`no value for ${operation.operationId}'s path parameter ${parameter.name}: add one here`);
      }
    }
    return fillPath(operation.path, values);
  }

  function send(operation: SpecOperation, url: string) {
    const request = client.request[operation.method.toLowerCase() as 'get' | 'post'](url);
    return operation.method === 'POST' ? request.type('form').send('') : request;
  }

  it('the spec marks the console, its assets, the API reference, the checkout pages and the old live page', () => {
    expect(pages.map((op) => op.operationId)).to.include.members([
      'getConsole',
      'getConsoleScript',
      'getConsoleStyles',
      'getApiReference',
      'getApiReferenceScript',
      'getCheckoutPage',
      'confirmCheckout',
      'cancelCheckout',
      'getLiveConversationPage',
      'getSharePage',
      'getShareScript',
    ]);
  });

  for (const page of pages) {
    it(`${page.method} ${page.path} (${page.operationId}) answers with unknown query parameters as without them`, async () => {
      const bare = await send(page, await pathOf(page));
      expect(bare.status, `${page.operationId} without a query`).to.be.within(200, 399);
      const withQuery = await send(page, `${await pathOf(page)}?${UNKNOWN_QUERY}`);
      expect(withQuery.status, `${page.operationId} with ?${UNKNOWN_QUERY}: ${withQuery.text.slice(0, 200)}`).to.equal(bare.status);
      expect(withQuery.headers['content-type']).to.equal(bare.headers['content-type']);
      if (page.method === 'GET' && bare.status === 200) expect(withQuery.text.length).to.equal(bare.text.length);
    });
  }

  it('a declared parameter of a page is still read and validated (getCheckoutPage ?outcome=)', async () => {
    const page = pages.find((op) => op.operationId === 'getCheckoutPage')!;
    expect(page.parameters.some((p) => p.in === 'query' && p.name === 'outcome')).to.equal(true);
    const path = await pathOf(page);
    const refused = await client.request.get(`${path}?outcome=no-such-outcome&utm_source=newsletter`).expect(422);
    expect(refused.body.detail.map((d: { loc: unknown[] }) => d.loc)).to.deep.equal([['query', 'outcome']]);
  });

  it('/?utm_source=newsletter, /docs?x=1 and /console/console.js?v=2 answer 200', async () => {
    for (const url of ['/?utm_source=newsletter', '/docs?x=1', '/console/console.js?v=2']) {
      const response = await client.request.get(url);
      expect(response.status, url).to.equal(200);
    }
  });

  it('every API GET operation without path parameters still refuses an unknown query parameter (422)', async () => {
    const admin = await createUserFixture({ superAdmin: true });
    const api = operations.filter((op) => !op.browserPage && op.method === 'GET' && !op.path.includes('{'));
    expect(api.length).to.be.greaterThan(5);
    for (const operation of api) {
      const schemes = schemesOf(operation);
      const headers = schemes.length === 0 ? {} : credentialHeaders(schemes[0]!, admin);
      const response = await client.request.get(`${operation.path}?utm_source=newsletter`).set(headers);
      expect(response.status, `${operation.operationId}: ${response.text.slice(0, 200)}`).to.equal(422);
      expect(response.body.detail.map((d: { loc: unknown[] }) => d.loc)).to.deep.include(['query', 'utm_source']);
    }
  });
});
