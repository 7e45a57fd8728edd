import http from 'node:http';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { createApp } from '../../src/app.ts';
import { createLogger } from '../../src/logger.ts';
import { MAX_ECHOED_INPUT_BYTES } from '../../src/api/validation-errors.ts';
import { ConversationService, type Event } from '../../src/conversations/conversation-service.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { testConfig, testDatabase } from '../helpers/hooks.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { postEvents, webhookPath } from '../helpers/webhook.ts';

const MiB = 1024 * 1024;
const messageOf = (text: string) => minimalEvent('MessageEvent', { llm_message: { role: 'user', content: [{ type: 'text', text }] } });

describe('POST /api/v1/webhooks/events/{conversation_id}: sizes', () => {
  let client: TestApp;
  let owner: UserFixture;
  before(async () => {
    client = await createTestApp();
  });
  beforeEach(async () => {
    owner = await createUserFixture();
  });

  const postText = (conversationId: string, text: string) => postEvents(client, owner.sessionApiKey, conversationId, text);
  const storedEvents = async (conversationId: string) =>
    (await client.request.get(`/api/v1/conversations/${conversationId}/events`).set('X-Access-Token', owner.accessToken).expect(200)).body.items as {
      event: { id: string; llm_message: { content: { text: string }[] } };
    }[];

  for (const megabytes of [12, 50]) {
    it(`stores a single ${megabytes} MB event (past BODY_LIMIT_BYTES) and reads it back identical`, async function () {
      this.timeout(120_000);
      const text = `${randomUUID()} ${'é agent output '.repeat(Math.ceil((megabytes * 1_000_000) / 16))}`;
      const event = messageOf(text);
      const body = JSON.stringify([event]);
      expect(Buffer.byteLength(body)).to.be.above(megabytes * 1_000_000);
      const conversationId = randomUUID();
      await postText(conversationId, body).expect(200);
      const [stored] = await storedEvents(conversationId);
      expect(stored!.event.id).to.equal(event.id);
      expect(stored!.event.llm_message.content[0]!.text === text).to.equal(true);
    });
  }

  it('answers 413 for a batch of two events over BODY_LIMIT_BYTES, and keeps it in the refusal ledger', async function () {
    this.timeout(60_000);
    const conversationId = randomUUID();
    const body = JSON.stringify([messageOf('a'.repeat(6 * MiB)), messageOf('b'.repeat(6 * MiB))]);
    const response = await postText(conversationId, body).expect(413);
    expect(response.body.detail).to.equal(`A batch of more than one event may hold at most ${10 * MiB} bytes (a single event up to ${64 * MiB})`);
    const [row] = (await testDatabase()
      .orm.em.getConnection()
      .execute('select status, reason, event_count, body_bytes, octet_length(body) as kept from refused_deliveries where owner_id = ?', [owner.userId])) as Record<string, unknown>[];
    expect(row).to.deep.include({ status: 413, reason: 'batch_too_large', event_count: 2, kept: Buffer.byteLength(body) });
  });

  it('answers 413 for a single event past WEBHOOK_SINGLE_EVENT_LIMIT_BYTES, and other operations keep BODY_LIMIT_BYTES', async () => {
    const small = await createTestApp({ bodyLimitBytes: 2048, webhookSingleEventLimitBytes: 8192 });
    const post = (path: string, body: string) => small.request.post(path).set('X-Session-API-Key', owner.sessionApiKey).set('Content-Type', 'application/json').send(body);
    await post(webhookPath(randomUUID()), JSON.stringify([messageOf('x'.repeat(6000))])).expect(200);
    await post(webhookPath(randomUUID()), JSON.stringify([messageOf('x'.repeat(9000))])).expect(413);
    const info = JSON.stringify({ id: randomUUID(), title: 'x'.repeat(4000), execution_status: 'idle', created_at: '2026-11-27T08:00:00Z', updated_at: '2026-11-27T08:00:00Z' });
    await post('/api/v1/webhooks/conversations', info).expect(413);
  });

  it('commits a batch over 8 MiB in a transaction of its own, the small batches beside it together', async function () {
    this.timeout(60_000);
    const conversations = new ConversationService(testDatabase().orm.em, createLogger('silent'), { maxInFlight: 1, maxBatches: 64, maxEvents: 500 });
    const small = () => conversations.ingest(owner, randomUUID(), [messageOf('small') as Event]);
    const huge = conversations.ingest(owner, randomUUID(), [messageOf('h'.repeat(9 * MiB)) as Event]);
    const outcomes = await Promise.all([huge, small(), small(), small()]);
    expect(outcomes.map((o) => o.stored)).to.deep.equal([1, 1, 1, 1]);
    expect(conversations.ingestion.stats).to.include({ batches: 4, transactions: 2, largestGroup: 3 });
  });

  it('answers 200 to an empty batch and creates no conversation', async () => {
    const conversationId = randomUUID();
    const response = await postText(conversationId, '[]').expect(200);
    expect(response.body).to.deep.equal({ success: true });
    await client.request.get(`/api/v1/conversations/${conversationId}`).set('X-Access-Token', owner.accessToken).expect(404);
  });

  describe('the 422 echo bound (docs/contract.md)', () => {
    it('echoes at most 1 KiB of a string: cut there and marked with its size', async () => {
      const extra = `${'ü'.repeat(100_000)}`;
      const response = await postText(randomUUID(), JSON.stringify([{ ...messageOf('hi'), colour: extra }])).expect(422);
      const [problem] = response.body.detail as { loc: unknown[]; type: string; input: string }[];
      expect(problem).to.include({ type: 'extra_forbidden' });
      expect(problem!.input).to.match(/^ü+…\[truncated: 200000 bytes\]$/);
      expect(Buffer.byteLength(problem!.input.split('…')[0]!)).to.be.at.most(MAX_ECHOED_INPUT_BYTES);
    });

    it('summarises an object or array larger than 1 KiB as {type, bytes}; smaller ones are echoed as they were', async () => {
      const big: Record<string, unknown> = { ...messageOf('y'), sender: 'y'.repeat(5000) };
      delete big.llm_message;
      const small = messageOf('z');
      delete small.llm_message;
      const response = await postText(randomUUID(), JSON.stringify([big, small])).expect(422);
      const [first, second] = response.body.detail as { loc: unknown[]; type: string; input: unknown }[];
      expect(first).to.deep.include({ loc: ['body', 0, 'llm_message'], type: 'missing' });
      expect(first!.input).to.have.keys('type', 'bytes').and.include({ type: 'object' });
      expect((first!.input as { bytes: number }).bytes).to.be.within(5000, Buffer.byteLength(JSON.stringify(big)) + 100);
      expect(second!.input).to.deep.equal(small);
    });
  });
});

describe('REQUEST_BODY_BUDGET_BYTES', () => {
  it('answers 503 with Retry-After while the bodies in flight would pass the budget, and takes bodies again once they are done', async function () {
    this.timeout(30_000);
    const owner = await createUserFixture();
    const { app } = await createApp({
      config: { ...testConfig(), requestBodyBudgetBytes: 100_000 },
      logger: createLogger('silent'),
      orm: testDatabase().orm,
      database: testDatabase(),
    });
    const server = await listenOutsideEphemeralPorts(app.callback());
    const { port } = server.address() as AddressInfo;
    const body = JSON.stringify([messageOf('w'.repeat(60_000))]);
    const send = (conversationId: string, options: { holdBack?: boolean } = {}) => {
      const request = http.request({
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: webhookPath(conversationId),
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-session-api-key': owner.sessionApiKey },
      });
      const answered = new Promise<{ status: number; retryAfter: string | undefined }>((resolve, reject) => {
        request.once('response', (response) => {
          response.resume();
          response.once('end', () => resolve({ status: response.statusCode!, retryAfter: response.headers['retry-after'] as string | undefined }));
        });
        request.once('error', reject);
      });
      if (options.holdBack) request.write(body.slice(0, 1000));
      else request.end(body);
      return { answered, finish: () => request.end(body.slice(1000)) };
    };
    try {
      const slow = send(randomUUID(), { holdBack: true });
      await new Promise((resolve) => setTimeout(resolve, 300)); // its 60 KB are reserved
      const refused = await send(randomUUID()).answered;
      expect(refused).to.deep.equal({ status: 503, retryAfter: '1' });
      slow.finish();
      expect((await slow.answered).status).to.equal(200);
      expect((await send(randomUUID()).answered).status).to.equal(200);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

/** Listens on a loopback port above the ephemeral range (61000-65535), which the test machines keep for clients. */
async function listenOutsideEphemeralPorts(handler: http.RequestListener): Promise<http.Server> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const port = 61_000 + Math.floor(Math.random() * 4_500);
    const server = http.createServer(handler);
    const listening = await new Promise<boolean>((resolve) => {
      server.once('error', () => resolve(false));
      server.listen(port, '127.0.0.1', () => resolve(true));
    });
    if (listening) return server;
  }
  throw new Error('no free port above the ephemeral range');
}
