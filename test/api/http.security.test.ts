import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { expect } from 'chai';
import { eventsOfEveryKind, minimalEvent } from '../fixtures/events.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { findSecretsInLogs, rememberSecret } from '../helpers/secret-scan.ts';
import { killAllProcesses, startServerProcess, type ServerProcess } from '../helpers/server-process.ts';
import {
  credentialHeaders,
  fillPath,
  schemesOf,
  specOperations,
  TEST_METRICS_TOKEN,
  USER_SCHEMES,
  type SpecOperation,
} from '../helpers/spec-operations.ts';
import { postEvents, webhookPath } from '../helpers/webhook.ts';

/**
 * Security, for every operation of the contract: without credentials, with the wrong kind of
 * credential, with a revoked one and with another user's, no operation reads, changes or reveals
 * another user's data. A security scheme this test does not know fails it ("unknown scheme X: add
 * it") instead of leaving an operation untested. Secrets never reach a response or a log line.
 */
const operations = specOperations();
const secured = operations.filter((op) => schemesOf(op).length > 0);
/** The credential kinds the tests can issue, by scheme. */
const KINDS = ['AccessToken', 'APIKeyHeader'] as const;
/**
 * Schemes whose credential is a query parameter issued through the API for one conversation (a
 * stream ticket, see `credentialOf`), not a header `credentialHeaders` can build.
 */
const QUERY_SCHEMES = ['StreamTicket'];
const ENCRYPTED = `gAAAAA-encrypted-${randomUUID()}`;

/**
 * Operations without a credential scheme, and what protects each instead. An operation without
 * security that is not listed here fails the test: whoever adds one says how it is protected.
 */
const PUBLIC_OPERATIONS: Record<string, { protectedBy: string; refused: number[] }> = {
  getHealth: { protectedBy: 'nothing to protect (liveness)', refused: [] },
  getApiReference: { protectedBy: 'nothing to protect (the public API reference)', refused: [] },
  getApiReferenceScript: { protectedBy: 'nothing to protect (the public API reference)', refused: [] },
  getOpenApiDocument: { protectedBy: 'nothing to protect (the public contract)', refused: [] },
  getReadiness: { protectedBy: 'nothing to protect (readiness)', refused: [] },
  getLiveConversationPage: { protectedBy: 'nothing to protect (a redirect to the console; its stream needs a ticket)', refused: [] },
  getConsole: { protectedBy: 'nothing to protect (the console page holds no data; it calls the API with the user\'s token)', refused: [] },
  getConsoleScript: { protectedBy: 'nothing to protect (the console\'s public script)', refused: [] },
  getConsoleStyles: { protectedBy: 'nothing to protect (the console\'s public style sheet)', refused: [] },
  receiveTrackerEvent: { protectedBy: 'X-Hub-Signature (HMAC of the body under the workspace secret)', refused: [401, 404] },
  handleStripeWebhook: { protectedBy: 'Stripe-Signature (checked by the Stripe SDK)', refused: [400, 401, 404] },
  getCheckoutPage: { protectedBy: 'the unguessable checkout session id in the URL', refused: [404] },
  confirmCheckout: { protectedBy: 'the unguessable checkout session id in the URL', refused: [404, 409] },
  cancelCheckout: { protectedBy: 'the unguessable checkout session id in the URL', refused: [404, 409] },
  getSharedConversation: { protectedBy: 'the unguessable share-link token in the URL (256 bits, stored hashed)', refused: [404] },
  listSharedEvents: { protectedBy: 'the unguessable share-link token in the URL (256 bits, stored hashed)', refused: [404] },
  getSharePage: { protectedBy: 'the unguessable share-link token in the URL (the page holds no data)', refused: [404] },
  getShareScript: { protectedBy: 'nothing to protect (the shared viewer\'s public script)', refused: [] },
};
const publicOperations = operations.filter((op) => schemesOf(op).length === 0);

describe('security: every operation, every kind of credential', function () {
  this.timeout(60_000);

  let app: TestApp;
  let owner: UserFixture;
  let other: UserFixture;
  let admin: UserFixture;
  let conversationId: string;
  let eventIds: string[];
  let modelId: number;

  before(async () => {
    app = await createTestApp({ metricsToken: TEST_METRICS_TOKEN });
    rememberSecret(ENCRYPTED);
    rememberSecret(TEST_METRICS_TOKEN);
  });

  beforeEach(async () => {
    owner = await createUserFixture();
    other = await createUserFixture();
    admin = await createUserFixture({ superAdmin: true });
    conversationId = randomUUID();
    const events = eventsOfEveryKind().map((event) =>
      event.responses_reasoning_item ? { ...event, responses_reasoning_item: { ...(event.responses_reasoning_item as object), encrypted_content: ENCRYPTED } } : event,
    );
    eventIds = events.filter((e) => e.kind !== 'StreamingDeltaEvent').map((e) => e.id as string);
    const ingest = await postEvents(app, owner.sessionApiKey, conversationId, events);
    expect(ingest.status, ingest.text).to.equal(200);
    const model = await app.request
      .post('/api/admin/verified-models')
      .set('X-Access-Token', admin.accessToken)
      .send({ model_name: `m-${randomUUID()}`, provider: 'anthropic' });
    expect(model.status, model.text).to.equal(201);
    modelId = (model.body as { id: number }).id;
  });

  function pathValues(op: SpecOperation): Record<string, string> {
    return Object.fromEntries(
      op.parameters
        .filter((p) => p.in === 'path')
        .map((p) => [p.name, p.name === 'conversation_id' ? conversationId : p.name === 'model_id' ? String(modelId) : p.schema?.format === 'uuid' ? randomUUID() : '1']),
    );
  }

  function exampleBody(op: SpecOperation): unknown {
    if (op.operationId === 'ingestEvents') return [minimalEvent('MessageEvent')];
    return op.bodyExample ?? {};
  }

  /**
   * The credential of `scheme` for `user`. A stream ticket is issued through the API for a
   * conversation of the user's own: the only kind anyone can get.
   */
  async function credentialOf(scheme: string, user: UserFixture): Promise<{ headers: Record<string, string>; query?: string }> {
    if (scheme !== 'StreamTicket') return { headers: credentialHeaders(scheme, user) };
    const ownConversation = randomUUID();
    const ingest = await postEvents(app, user.sessionApiKey, ownConversation, [minimalEvent('MessageEvent')]);
    expect(ingest.status, ingest.text).to.equal(200);
    const issued = await app.request.post(`/api/v1/conversations/${ownConversation}/events/stream-tickets`).set('X-Access-Token', user.accessToken);
    expect(issued.status, issued.text).to.equal(201);
    const { ticket } = issued.body as { ticket: string };
    rememberSecret(ticket);
    return { headers: {}, query: `ticket=${encodeURIComponent(ticket)}` };
  }

  async function call(op: SpecOperation, headers: Record<string, string>, query?: string) {
    const url = fillPath(op.path, pathValues(op)) + (query ? `?${query}` : '');
    let request = (app.request as unknown as Record<string, (url: string) => import('supertest').Test>)[op.method.toLowerCase()]!(url).set(headers);
    if (op.hasBody) request = request.send(exampleBody(op) as object);
    return request;
  }

  /** Everything of the owner's that nobody else may see or change. */
  async function ownerSnapshot(): Promise<string> {
    const connection = testDatabase().orm.em.getConnection();
    const rows = await Promise.all([
      connection.execute('select seq, event_id, payload::text from conversation_events where conversation_id = ? order by seq', [conversationId]),
      connection.execute('select id, owner_id, execution_status, event_count from conversations where owner_id = ?', [owner.userId]),
      connection.execute('select id, kind, secret_hash, revoked_at from credentials where user_id = ? order by id', [owner.userId]),
      connection.execute('select id, model_name, provider, is_enabled from verified_models order by id'),
      connection.execute('select id, email, is_super_admin from users order by id'),
    ]);
    return JSON.stringify(rows);
  }

  /** What of the owner's data must not appear in a response to anyone else. */
  function ownerMarkers(): string[] {
    return [conversationId, conversationId.replaceAll('-', ''), owner.email, owner.accessToken, owner.sessionApiKey, ENCRYPTED, ...eventIds];
  }

  it('every operation names only security schemes this test knows how to satisfy', () => {
    expect(secured.length).to.be.greaterThan(5);
    for (const op of secured) {
      for (const scheme of schemesOf(op).filter((s) => !QUERY_SCHEMES.includes(s))) credentialHeaders(scheme, owner); // throws "unknown scheme X: add it"
    }
  });

  it('every operation without a credential scheme is a known public one, with what protects it', () => {
    const unknown = publicOperations.map((op) => op.operationId).filter((id) => !PUBLIC_OPERATIONS[id]);
    expect(unknown, 'operations without security: add them to PUBLIC_OPERATIONS with what protects them').to.deep.equal([]);
  });

  for (const op of publicOperations.filter((o) => PUBLIC_OPERATIONS[o.operationId]?.refused.length)) {
    it(`${op.operationId} (public, protected by ${PUBLIC_OPERATIONS[op.operationId]!.protectedBy}): without its proof it is refused, reveals and changes nothing`, async () => {
      const before = await ownerSnapshot();
      const attempts: Record<string, string>[] = [{}, { 'X-Access-Token': owner.accessToken, 'X-Session-API-Key': owner.sessionApiKey }];
      for (const headers of attempts) {
        const response = await call(op, headers);
        expect(response.status, `${op.operationId}: ${response.text}`).to.be.oneOf(PUBLIC_OPERATIONS[op.operationId]!.refused);
        for (const marker of ownerMarkers()) expect(response.text).to.not.include(marker);
      }
      expect(await ownerSnapshot()).to.equal(before);
    });
  }

  for (const op of secured) {
    describe(`${op.method} ${op.path} (${op.operationId}; ${schemesOf(op).join(' or ')})`, () => {
      it('without credentials → 401, nothing changes', async () => {
        const before = await ownerSnapshot();
        for (const headers of [{}, { 'X-Access-Token': '' }, { 'X-Session-API-Key': 'apsk_' + 'x'.repeat(43) }, { 'X-Access-Token': 'apat_' + 'A'.repeat(43) }]) {
          const response = await call(op, headers as Record<string, string>);
          expect(response.status, `${JSON.stringify(headers)}: ${response.text}`).to.equal(401);
        }
        if (schemesOf(op).includes('StreamTicket')) {
          for (const junk of ['', 'apst_' + 'A'.repeat(43), 'x']) {
            const response = await call(op, {}, `ticket=${junk}`);
            expect(response.status, `ticket=${junk}: ${response.text}`).to.equal(401);
          }
        }
        expect(await ownerSnapshot()).to.equal(before);
      });

      it('with the wrong kind of credential (another kind, or a secret in the other kind\'s header) → 401, nothing changes', async () => {
        const schemes = schemesOf(op);
        const before = await ownerSnapshot();
        const unknown = schemes.filter((s) => !(KINDS as readonly string[]).includes(s) && !QUERY_SCHEMES.includes(s));
        for (const scheme of unknown) credentialHeaders(scheme, owner); // unknown scheme X: add it
        for (const kind of KINDS.filter((k) => !schemes.includes(k))) {
          const response = await call(op, credentialHeaders(kind, owner));
          expect(response.status, `${kind} for ${op.operationId}: ${response.text}`).to.equal(401);
        }
        // A secret of one kind presented in the header of the other kind.
        const swapped: Record<string, string>[] = [{ 'X-Access-Token': owner.sessionApiKey }, { 'X-Session-API-Key': owner.accessToken }];
        for (const headers of swapped) {
          const response = await call(op, headers);
          expect(response.status, `${JSON.stringify(Object.keys(headers))}: ${response.text}`).to.equal(401);
        }
        expect(await ownerSnapshot()).to.equal(before);
      });

      it('with a revoked credential → 401, nothing changes', async () => {
        // Only credentials of users can be revoked (a configured token is changed in the
        // configuration); a stream ticket dies with the access token that got it.
        const revocable = schemesOf(op).filter((x) => USER_SCHEMES.includes(x) || QUERY_SCHEMES.includes(x));
        const credentials = await Promise.all(revocable.map((scheme) => credentialOf(scheme, owner)));
        await testDatabase().orm.em.getConnection().execute('update credentials set revoked_at = now() where user_id = ?', [owner.userId]);
        const before = await ownerSnapshot();
        for (const [i, scheme] of revocable.entries()) {
          const response = await call(op, credentials[i]!.headers, credentials[i]!.query);
          expect(response.status, `${scheme}: ${response.text}`).to.equal(401);
        }
        expect(await ownerSnapshot()).to.equal(before);
      });

      it("with another user's credential: nothing of the owner's is read, changed or revealed", async () => {
        const before = await ownerSnapshot();
        for (const scheme of schemesOf(op)) {
          const credential = await credentialOf(scheme, other);
          const response = await call(op, credential.headers, credential.query);
          for (const marker of ownerMarkers()) {
            expect(response.text, `${op.operationId} with ${scheme} of another user reveals ${marker}`).to.not.include(marker);
          }
          if (op.permission) expect(response.status, `${op.operationId} needs ${op.permission}: ${response.text}`).to.equal(403);
          if (op.parameters.some((p) => p.name === 'conversation_id' && p.in === 'path')) {
            expect(response.status, `${op.operationId} on another user's conversation: ${response.text}`).to.be.oneOf([403, 404]);
          }
        }
        expect(await ownerSnapshot(), `${op.operationId} changed the owner's data`).to.equal(before);
      });
    });
  }

  // In a describe of its own, so that it runs after the operations' describes (mocha runs a
  // describe's own tests before its nested describes) and scans what they logged.
  describe('after all of the above', () => it('the owner reads encrypted_content back as null; no response or log line holds it or a credential', async () => {
    const read = await app.request.get(`/api/v1/conversations/${conversationId}/events?limit=1000`).set('X-Access-Token', owner.accessToken);
    expect(read.status).to.equal(200);
    expect(read.text).to.not.include(ENCRYPTED);
    const items = (read.body as { items: { event: Record<string, unknown> }[] }).items;
    const withReasoning = items.map((i) => i.event).filter((e) => e.responses_reasoning_item);
    expect(withReasoning.length).to.be.greaterThan(0);
    for (const event of withReasoning) expect((event.responses_reasoning_item as { encrypted_content: unknown }).encrypted_content).to.equal(null);
    // Everything this file made the app log so far (debug level: every request) holds no secret.
    const lines = app.logs.join('').split('\n').filter(Boolean);
    expect(lines.length, 'the app logged every request').to.be.greaterThan(100);
    const findings = findSecretsInLogs();
    expect(findings, JSON.stringify(findings.slice(0, 3))).to.deep.equal([]);
  }));
});

describe('security: slow clients cannot hold the server', function () {
  this.timeout(60_000);

  const HEADERS_TIMEOUT_MS = 1_000;
  const REQUEST_TIMEOUT_MS = 2_000;
  const KEEP_ALIVE_TIMEOUT_MS = 1_000;
  let server: ServerProcess;

  before(async () => {
    server = await startServerProcess({
      ...process.env,
      DATABASE_URL: testDatabase().url,
      LOG_LEVEL: 'info',
      HTTP_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
      HTTP_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
      HTTP_KEEP_ALIVE_TIMEOUT_MS: String(KEEP_ALIVE_TIMEOUT_MS),
    });
  });

  after(async () => {
    await killAllProcesses();
  });

  /** Opens a raw socket; resolves with how long until the server closed it and what it answered. */
  function slowClient(feed: (socket: net.Socket) => NodeJS.Timeout): Promise<{ closedAfterMs: number; answer: string }> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(server.port, '127.0.0.1');
      const started = Date.now();
      let answer = '';
      let timer: NodeJS.Timeout | undefined;
      socket.on('connect', () => (timer = feed(socket)));
      socket.on('data', (chunk) => (answer += chunk.toString()));
      socket.on('error', () => {});
      socket.on('close', () => {
        clearInterval(timer);
        resolve({ closedAfterMs: Date.now() - started, answer });
      });
      setTimeout(() => reject(new Error('the server never closed the slow connection')), 20_000).unref();
    });
  }

  async function healthyWhile<T>(work: Promise<T>): Promise<T> {
    // While the slow clients hang on, other clients are served promptly.
    let probes = 0;
    let done = false;
    void work.finally(() => (done = true));
    while (!done) {
      const started = Date.now();
      const response = await fetch(`${server.baseUrl}/healthz`);
      expect(response.status).to.equal(200);
      expect(Date.now() - started, 'a normal request while slow clients hang on').to.be.below(1_000);
      probes++;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(probes).to.be.greaterThan(0);
    return work;
  }

  it('slowloris headers (a header line every 300 ms, 30 connections): each connection is closed after the headers timeout; others are served meanwhile', async () => {
    const clients = Array.from({ length: 30 }, () =>
      slowClient((socket) => {
        socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
        let n = 0;
        return setInterval(() => socket.write(`X-Slow-${n++}: ${'a'.repeat(10)}\r\n`), 300);
      }),
    );
    const results = await healthyWhile(Promise.all(clients));
    const slowest = Math.max(...results.map((r) => r.closedAfterMs));
    console.log(`      slowloris: all 30 connections closed within ${slowest} ms (headers timeout ${HEADERS_TIMEOUT_MS} ms)`);
    expect(slowest).to.be.below(HEADERS_TIMEOUT_MS + 2_000);
    for (const r of results) expect(r.answer).to.not.include('200 OK');
  });

  it('a trickled body (1 byte every 200 ms) is cut after the request timeout; others are served meanwhile', async () => {
    const clients = Array.from({ length: 10 }, () =>
      slowClient((socket) => {
        socket.write(`POST ${webhookPath(randomUUID())} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n[`);
        return setInterval(() => socket.write(' '), 200);
      }),
    );
    const results = await healthyWhile(Promise.all(clients));
    const slowest = Math.max(...results.map((r) => r.closedAfterMs));
    console.log(`      trickled body: all 10 connections closed within ${slowest} ms (request timeout ${REQUEST_TIMEOUT_MS} ms)`);
    expect(slowest).to.be.below(REQUEST_TIMEOUT_MS + 2_000);
  });

  it('an idle keep-alive connection is closed after the keep-alive timeout', async () => {
    const result = await slowClient((socket) => {
      socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n');
      return setInterval(() => {}, 1_000);
    });
    expect(result.answer).to.include('200 OK');
    console.log(`      idle keep-alive connection closed after ${result.closedAfterMs} ms (keep-alive timeout ${KEEP_ALIVE_TIMEOUT_MS} ms)`);
    expect(result.closedAfterMs).to.be.within(KEEP_ALIVE_TIMEOUT_MS - 100, KEEP_ALIVE_TIMEOUT_MS + 2_000);
  });
});
