import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { postEvents } from '../helpers/webhook.ts';

/**
 * What the real agent-server sends, serialized by the SDK's own models (software-agent-sdk at
 * commit 611629e, openhands-sdk 1.43.1) with `model_dump(mode="json")`, as its WebhookSubscriber
 * does. `test/fixtures/agent-server/generator/` produces the files; see the README there.
 */
const fixturesDir = new URL('../fixtures/agent-server/', import.meta.url);
const eventsText = readFileSync(new URL('events.json', fixturesDir), 'utf8');
const sdkEvents = JSON.parse(eventsText) as Record<string, unknown>[];

/** The agent-server's batch size (`WebhookSpec.event_buffer_size` default). */
const BATCH_SIZE = 5;

const ALL_KINDS = [
  'ServerErrorEvent',
  'ACPToolCallEvent',
  'Condensation',
  'CondensationRequest',
  'CondensationSummaryEvent',
  'ConversationErrorEvent',
  'ConversationStateUpdateEvent',
  'HookExecutionEvent',
  'LLMCompletionLogEvent',
  'ActionEvent',
  'MessageEvent',
  'AgentErrorEvent',
  'ObservationEvent',
  'UserRejectObservation',
  'SystemPromptEvent',
  'StreamingDeltaEvent',
  'TokenEvent',
  'InterruptEvent',
  'PauseEvent',
];

/** The `event` members of an EventPage, each as the exact JSON text the server wrote. */
function eventTexts(pageText: string): string[] {
  const page = JSON.parse(pageText) as { items: { event: unknown }[] };
  // The page is built by splicing stored texts; re-serializing a parsed event gives the same text
  // only if nothing (order, escapes, numbers) changed, which is what this suite checks.
  return page.items.map((item) => JSON.stringify(item.event));
}

describe('the real agent-server, end to end (SDK fixtures)', () => {
  let client: TestApp;
  let owner: UserFixture;
  before(async () => {
    client = await createTestApp();
  });
  beforeEach(async () => {
    owner = await createUserFixture();
  });

  const postBatch = (hexId: string, events: unknown[]) => postEvents(client, owner.sessionApiKey, hexId, events);

  const readAll = async (conversationId: string) => {
    const response = await client.request
      .get(`/api/v1/conversations/${conversationId}/events?limit=1000`)
      .set('X-Access-Token', owner.accessToken)
      .expect(200);
    return response.text;
  };

  it('covers every one of the 19 event kinds, with classification on both error events', () => {
    expect([...new Set(sdkEvents.map((e) => e.kind))].sort()).to.deep.equal([...ALL_KINDS].sort());
    for (const kind of ['ConversationErrorEvent', 'AgentErrorEvent']) {
      const event = sdkEvents.find((e) => e.kind === kind)!;
      expect(event.classification, kind).to.be.an('object');
    }
  });

  it('stores every event as the agent-server posts it (32-hex id, batches of 5, each redelivered once) and reads it back identical', async () => {
    const conversationId = randomUUID();
    const hexId = conversationId.replace(/-/g, '');
    for (let start = 0; start < sdkEvents.length; start += BATCH_SIZE) {
      const batch = sdkEvents.slice(start, start + BATCH_SIZE);
      const first = await postBatch(hexId, batch);
      expect(first.status, JSON.stringify(first.body)).to.equal(200);
      // raise_for_status() passed, but the answer was lost: the agent-server posts the batch again.
      await postBatch(hexId, batch).expect(200, { success: true });
    }

    // `encrypted_content` is stored but never rendered: it reads back as null, in its place.
    const hidden = (value: unknown): unknown =>
      Array.isArray(value)
        ? value.map(hidden)
        : value && typeof value === 'object'
          ? Object.fromEntries(
              Object.entries(value).map(([k, v]) => [k, k === 'encrypted_content' && typeof v === 'string' ? null : hidden(v)]),
            )
          : value;
    const expected = sdkEvents.filter((e) => e.kind !== 'StreamingDeltaEvent').map(hidden);
    expect(JSON.stringify(sdkEvents)).to.include('"encrypted_content":"');
    const texts = eventTexts(await readAll(conversationId));
    expect(texts).to.have.length(expected.length);
    expect(texts.map((text) => JSON.parse(text))).to.deep.equal(expected);
    // Exact text, key order included: each event reads back as the SDK wrote it (compact form).
    expect(texts).to.deep.equal(expected.map((event) => JSON.stringify(event)));
  });

  it("takes the agent-server's ConversationInfo as it posts it, beside the events of the same conversation", async () => {
    const info = JSON.parse(readFileSync(new URL('conversation-info.json', fixturesDir), 'utf8')) as Record<string, unknown>;
    const conversationId = info.id as string;
    const post = () =>
      client.request.post('/api/v1/webhooks/conversations').set('X-Session-API-Key', owner.sessionApiKey).send(info);
    await post().expect(201);
    await postBatch(conversationId.replace(/-/g, ''), sdkEvents.slice(0, BATCH_SIZE)).expect(200);
    await post().expect(200); // posted again on the next state change
    const conversation = await client.request
      .get(`/api/v1/conversations/${conversationId}`)
      .set('X-Access-Token', owner.accessToken)
      .expect(200);
    expect(conversation.body).to.include({ id: conversationId, title: info.title, execution_status: info.execution_status, event_count: BATCH_SIZE });
    expect(conversation.body.metrics).to.deep.equal(info.metrics);
  });

  it('reads back the NUL and the lone surrogate of a terminal observation exactly', async () => {
    const observation = sdkEvents.find((e) => e.kind === 'ObservationEvent')!;
    const output = JSON.stringify(observation.observation);
    expect(output).to.contain('\\u0000').and.to.contain('\\udc80');
    const conversationId = randomUUID();
    await postBatch(conversationId.replace(/-/g, ''), [observation]).expect(200);
    const [text] = eventTexts(await readAll(conversationId));
    expect(text).to.equal(JSON.stringify(observation));
  });

  it('accepts action kinds beyond the interface list: ConsultTomAction and client tools (ClientAction_<name>)', async () => {
    const kinds = sdkEvents.filter((e) => e.kind === 'ActionEvent').map((e) => (e.action as { kind: string }).kind);
    expect(kinds).to.include.members(['ConsultTomAction', 'ClientAction_open_url', 'TerminalAction', 'FileEditorAction']);
    const conversationId = randomUUID();
    await postBatch(conversationId, sdkEvents.filter((e) => e.kind === 'ActionEvent')).expect(200);
  });
});

describe('what neither the interface nor the real client has is still a 422', () => {
  let client: TestApp;
  let owner: UserFixture;
  before(async () => {
    client = await createTestApp();
  });
  beforeEach(async () => {
    owner = await createUserFixture();
  });

  const sdkEvent = (kind: string, index = 0) => structuredClone(sdkEvents.filter((e) => e.kind === kind)[index]!);
  const post = (events: unknown[]) => postEvents(client, owner.sessionApiKey, randomUUID(), events);
  type Detail = { detail: { loc: (string | number)[]; type: string }[] };

  it('refuses an unknown property inside classification (the SDK model forbids extras)', async () => {
    const event = sdkEvent('AgentErrorEvent');
    (event.classification as Record<string, unknown>).detail = 'leaked provider text';
    const response = await post([event]).expect(422);
    expect((response.body as Detail).detail).to.deep.include({
      loc: ['body', 0, 'classification', 'detail'],
      msg: 'Extra inputs are not permitted',
      type: 'extra_forbidden',
      input: 'leaked provider text',
    });
  });

  it('refuses a classification kind outside the closed vocabulary', async () => {
    const event = sdkEvent('ConversationErrorEvent');
    (event.classification as Record<string, unknown>).kind = 'fatal';
    const response = await post([event]).expect(422);
    const entries = (response.body as Detail).detail.map((d) => [d.loc.join('.'), d.type]);
    expect(entries).to.deep.include(['body.0.classification.kind', 'enum']);
  });

  it('accepts a null or absent classification (older producers)', async () => {
    const withNull = { ...sdkEvent('ConversationErrorEvent'), classification: null };
    const { classification: _absent, ...without } = sdkEvent('AgentErrorEvent');
    await post([withNull, without]).expect(200);
  });

  it('refuses an action kind that is neither listed nor a client tool', async () => {
    const event = sdkEvent('ActionEvent');
    (event.action as Record<string, unknown>).kind = 'RmRfAction';
    const response = await post([event]).expect(422);
    const entries = (response.body as Detail).detail.map((d) => d.loc.join('.'));
    expect(entries).to.include('body.0.action.kind');
  });

  it('refuses an unknown property on an event of the real client', async () => {
    const event = { ...sdkEvent('ObservationEvent'), reasoning_trace: 'x' };
    const response = await post([event]).expect(422);
    expect((response.body as Detail).detail.map((d) => [d.loc.join('.'), d.type])).to.deep.equal([
      ['body.0.reasoning_trace', 'extra_forbidden'],
    ]);
  });

  it('follows ConversationStateUpdateEvent to the SDK status `deleting`', async () => {
    const conversationId = randomUUID();
    await postEvents(client, owner.sessionApiKey, conversationId, [sdkEvents.find((e) => e.kind === 'ConversationStateUpdateEvent' && e.value === 'deleting')]).expect(200);
    const conversation = await client.request
      .get(`/api/v1/conversations/${conversationId}`)
      .set('X-Access-Token', owner.accessToken)
      .expect(200);
    expect(conversation.body.execution_status).to.equal('deleting');
  });
});
