import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { expect } from 'chai';
import fc from 'fast-check';
import { createApp, type App } from '../../src/app.ts';
import { createLogger } from '../../src/logger.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { freePort } from '../../scripts/lib/free-port.ts';
import { testConfig, testDatabase } from '../helpers/hooks.ts';
import { openEventStream, type SseMessage } from '../helpers/event-stream.ts';
import { parsePrometheusText, sumSamples } from '../helpers/prometheus.ts';
import { postEvents, webhookPath } from '../helpers/webhook.ts';

/** Events as the SDK's own models serialize them (see test/fixtures/agent-server/generator/). */
const sdkEvents = JSON.parse(readFileSync(new URL('../fixtures/agent-server/events.json', import.meta.url), 'utf8')) as Record<string, unknown>[];
const sdkEvent = (kind: string) => structuredClone(sdkEvents.find((e) => e.kind === kind)!);

/** A kind a later SDK may send, which this contract does not know (a NUL and a large number in it, to check it is kept as sent). */
const futureEvent = (): Record<string, unknown> => ({
  kind: 'ConversationForkedEvent',
  id: randomUUID(),
  timestamp: '2026-11-27T08:00:00.000000',
  source: 'a-source-longer-than-sixteen-characters',
  forked_into: randomUUID(),
  nested: { text: 'nul \u0000 here', big: 1 },
});

/** A known kind carrying properties this contract does not know, at the top and inside a closed sub-object. */
const knownWithNewProperties = (): Record<string, unknown> => {
  const event = sdkEvent('AgentErrorEvent');
  event.id = randomUUID();
  event.retry_after_seconds = 30;
  (event.classification as Record<string, unknown>)['provider detail'] = 'x';
  return event;
};

type Detail = { detail: { loc: (string | number)[]; type: string }[] };

function webhookClient(client: () => TestApp, owner: () => UserFixture) {
  return {
    post: (conversationId: string, body: string) => postEvents(client(), owner().sessionApiKey, conversationId, body),
    get: (path: string) => client().request.get(path).set('X-Access-Token', owner().accessToken),
  };
}

describe('POST /api/v1/webhooks/events/{conversation_id} with WEBHOOK_EVENT_COMPATIBILITY=strict (the default)', () => {
  let client: TestApp;
  let owner: UserFixture;
  before(async () => {
    client = await createTestApp();
  });
  beforeEach(async () => {
    owner = await createUserFixture();
  });
  const api = webhookClient(() => client, () => owner);

  it('returns 422 for an event of a kind the spec does not know, and stores nothing of the batch', async () => {
    const conversationId = randomUUID();
    const response = await api.post(conversationId, JSON.stringify([sdkEvent('MessageEvent'), futureEvent()])).expect(422);
    expect((response.body as Detail).detail.map((d) => d.loc.slice(0, 2))).to.deep.include(['body', 1]);
    await api.get(`/api/v1/conversations/${conversationId}`).expect(404);
  });

  it('returns 422 naming each property the spec does not know on a known kind', async () => {
    const response = await api.post(randomUUID(), JSON.stringify([knownWithNewProperties()])).expect(422);
    const entries = (response.body as Detail).detail.map((d) => [d.loc.join('.'), d.type]);
    expect(entries).to.deep.include.members([
      ['body.0.retry_after_seconds', 'extra_forbidden'],
      ['body.0.classification.provider detail', 'extra_forbidden'],
    ]);
  });
});

describe('POST /api/v1/webhooks/events/{conversation_id} with WEBHOOK_EVENT_COMPATIBILITY=accept-unknown', () => {
  let client: TestApp;
  let owner: UserFixture;
  before(async () => {
    client = await createTestApp({ webhookEventCompatibility: 'accept-unknown', metricsToken: undefined });
  });
  beforeEach(async () => {
    owner = await createUserFixture();
  });
  const api = webhookClient(() => client, () => owner);

  it('stores an unknown kind and unknown properties as sent, flagged, beside the known events of the batch', async () => {
    const conversationId = randomUUID();
    const known = sdkEvent('MessageEvent');
    const future = futureEvent();
    const extended = knownWithNewProperties();
    // Sent as text: the large number must keep its digits, which a JavaScript object cannot show.
    const texts = [JSON.stringify(known), JSON.stringify(future).replace('"big":1', '"big":12345678901234567890123'), JSON.stringify(extended)];
    await api.post(conversationId.replace(/-/g, ''), `[${texts.join(',')}]`).expect(200, { success: true });

    const page = await api.get(`/api/v1/conversations/${conversationId}/events`).expect(200);
    const items = (page.body as { items: Record<string, unknown>[] }).items;
    expect(items.map((item) => item.unrecognized)).to.deep.equal([
      undefined,
      { kind: true, properties: [] },
      { kind: false, properties: ['$.classification["provider detail"]', '$.retry_after_seconds'] },
    ]);
    // Byte-identical: each event's text in the page is the text that was sent.
    for (const text of texts) expect(page.text).to.include(`"event":${text}}`);
    expect(page.text).to.include('12345678901234567890123').and.to.include('\\u0000');

    const one = await api.get(`/api/v1/conversations/${conversationId}/events/${future.id as string}`).expect(200);
    expect(one.text).to.include(`"unrecognized":{"kind":true,"properties":[]},"event":${texts[1]}}`);

    const conversation = await api.get(`/api/v1/conversations/${conversationId}`).expect(200);
    expect(conversation.body).to.include({ event_count: 3, unrecognized_event_count: 2 });
    const list = await api.get('/api/v1/conversations').expect(200);
    expect(list.body.items[0]).to.include({ id: conversationId, unrecognized_event_count: 2 });
  });

  it('is idempotent by event id for flagged events too', async () => {
    const conversationId = randomUUID();
    const body = JSON.stringify([futureEvent(), knownWithNewProperties()]);
    await api.post(conversationId, body).expect(200);
    await api.post(conversationId, body).expect(200);
    const conversation = await api.get(`/api/v1/conversations/${conversationId}`).expect(200);
    expect(conversation.body).to.include({ event_count: 2, unrecognized_event_count: 2 });
  });

  it('exports flagged events with their marker', async () => {
    const conversationId = randomUUID();
    const future = futureEvent();
    await api.post(conversationId, JSON.stringify([sdkEvent('PauseEvent'), future])).expect(200);
    const exported = await api.get(`/api/v1/conversations/${conversationId}/export`).buffer(true).parse((res, done) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => done(null, text));
    });
    expect(exported.status).to.equal(200);
    const lines = (exported.body as string).trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines[0]!.conversation).to.include({ unrecognized_event_count: 1 });
    expect(lines[1]).not.to.have.property('unrecognized');
    expect(lines[2]).to.deep.include({ unrecognized: { kind: true, properties: [] } });
    expect((exported.body as string).split('\n')[2]).to.include(`"event":${JSON.stringify(future)}}`);
  });

  it('counts unrecognized events in /metrics by kind, and bounds the labels of unknown kinds', async () => {
    const before = parsePrometheusText((await client.request.get('/metrics').expect(200)).text);
    await api.post(randomUUID(), JSON.stringify([futureEvent(), futureEvent(), knownWithNewProperties(), { ...futureEvent(), kind: 'not a label!' }])).expect(200);
    const after = parsePrometheusText((await client.request.get('/metrics').expect(200)).text);
    const delta = (labels: Record<string, string>) =>
      sumSamples(after, 'webhook_events_unrecognized_total', labels) - sumSamples(before, 'webhook_events_unrecognized_total', labels);
    expect(delta({ kind: 'ConversationForkedEvent' })).to.equal(2);
    expect(delta({ kind: 'AgentErrorEvent' })).to.equal(1);
    expect(delta({ kind: 'other' })).to.equal(1);
  });

  it('still returns 422 for a known kind with a missing required field or a wrong type, even beside unknown properties', async () => {
    const wrongType = { ...knownWithNewProperties(), error: 42 };
    const response = await api.post(randomUUID(), JSON.stringify([futureEvent(), wrongType])).expect(422);
    expect((response.body as Detail).detail.map((d) => d.loc.join('.'))).to.include('body.1.error');
    const { tool_name: _missing, ...withoutToolName } = knownWithNewProperties();
    const missing = await api.post(randomUUID(), JSON.stringify([withoutToolName])).expect(422);
    expect((missing.body as Detail).detail.map((d) => [d.loc.join('.'), d.type])).to.deep.include(['body.0.tool_name', 'missing']);
    const badClassification = knownWithNewProperties();
    (badClassification.classification as Record<string, unknown>).kind = 'fatal';
    await api.post(randomUUID(), JSON.stringify([badClassification])).expect(422);
  });

  it('returns 422 for an unknown kind it cannot store: a kind over 64 characters, an id that is not an event id', async () => {
    await api.post(randomUUID(), JSON.stringify([{ ...futureEvent(), kind: `K${'x'.repeat(64)}` }])).expect(422);
    await api.post(randomUUID(), JSON.stringify([{ ...futureEvent(), id: 42 }])).expect(422);
    await api.post(randomUUID(), JSON.stringify([{ ...futureEvent(), kind: 7 }])).expect(422);
  });

  it('never answers a 5xx to random events (fast-check, fixed seed): known kinds with random extras, random kinds, random members', async () => {
    const known = [...new Set(sdkEvents.map((e) => e.kind as string))];
    const event = fc.tuple(
      fc.oneof(fc.constantFrom(...known).map((kind) => sdkEvent(kind)), fc.record({ kind: fc.oneof(fc.string(), fc.jsonValue()) })),
      fc.dictionary(fc.string(), fc.jsonValue(), { maxKeys: 4 }),
      fc.option(fc.oneof(fc.string(), fc.constantFrom('agent', 'user')), { nil: undefined }),
    ).map(([base, extra, source]): Record<string, unknown> => ({ ...base, ...extra, ...(source === undefined ? {} : { source }), id: randomUUID() }));
    await fc.assert(
      fc.asyncProperty(fc.array(event, { minLength: 1, maxLength: 4 }), async (events) => {
        const conversationId = randomUUID();
        const response = await api.post(conversationId, JSON.stringify(events));
        expect(response.status, response.text).to.be.oneOf([200, 422]);
        if (response.status === 200) {
          const page = await api.get(`/api/v1/conversations/${conversationId}/events`).expect(200);
          expect((page.body as { items: unknown[] }).items.length).to.equal(events.filter((e) => e.kind !== 'StreamingDeltaEvent').length);
        }
      }),
      { numRuns: 60, seed: 20261127 },
    );
  });

  it('stores batches of known events exactly as strict mode does (no marker)', async () => {
    const conversationId = randomUUID();
    await api.post(conversationId, JSON.stringify(sdkEvents.slice(0, 5))).expect(200);
    const conversation = await api.get(`/api/v1/conversations/${conversationId}`).expect(200);
    expect(conversation.body.unrecognized_event_count).to.equal(0);
    const page = await api.get(`/api/v1/conversations/${conversationId}/events`).expect(200);
    expect(page.text).not.to.include('"unrecognized"');
  });
});

describe('GET /api/v1/conversations/{conversation_id}/events/stream with WEBHOOK_EVENT_COMPATIBILITY=accept-unknown', () => {
  let server: Server;
  let baseUrl: string;
  let owner: UserFixture;
  let liveStreams: App['liveStreams'];
  before(async () => {
    const port = await freePort();
    baseUrl = `http://127.0.0.1:${port}`;
    const database = testDatabase();
    const built = await createApp({
      config: { ...testConfig(), webhookEventCompatibility: 'accept-unknown' },
      logger: createLogger('silent'),
      orm: database.orm,
      database,
    });
    liveStreams = built.liveStreams;
    server = built.app.listen(port, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
  });
  after(async () => {
    await liveStreams.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  beforeEach(async () => {
    owner = await createUserFixture();
  });

  it('streams a flagged event live with its marker, as it reads back', async () => {
    const conversationId = randomUUID();
    const post = (events: unknown[]) =>
      fetch(`${baseUrl}${webhookPath(conversationId)}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Session-API-Key': owner.sessionApiKey },
        body: JSON.stringify(events),
      });
    expect((await post([sdkEvent('PauseEvent')])).status).to.equal(200);
    const stream = await openEventStream(`${baseUrl}/api/v1/conversations/${conversationId}/events/stream`, { 'X-Access-Token': owner.accessToken });
    try {
      expect(stream.status).to.equal(200);
      const future = futureEvent();
      expect((await post([future])).status).to.equal(200);
      const events = (messages: SseMessage[]) => messages.filter((m) => m.event === 'event');
      expect(await stream.until((messages) => events(messages).length >= 2)).to.equal(true);
      const [, live] = events(stream.parser.messages);
      expect(JSON.parse(live!.data).unrecognized).to.deep.equal({ kind: true, properties: [] });
      expect(live!.data).to.include(`"event":${JSON.stringify(future)}}`);
    } finally {
      stream.close();
    }
  });
});
