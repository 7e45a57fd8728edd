import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { MikroORM } from '@mikro-orm/postgresql';
import { createApp } from '../../src/app.ts';
import { ormOptions } from '../../src/db/database.ts';
import { createLogger } from '../../src/logger.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { testConfig } from '../helpers/hooks.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { eventsOfEveryKind, minimalEvent } from '../fixtures/events.ts';
import supertest from 'supertest';
import { postEvents, webhookPath } from '../helpers/webhook.ts';


describe('POST /api/v1/webhooks/events/{conversation_id}', () => {
  let client: TestApp;
  let owner: UserFixture;
  before(async () => {
    client = await createTestApp();
  });
  beforeEach(async () => {
    owner = await createUserFixture();
  });

  const post = (conversationId: string, events: unknown, key = owner.sessionApiKey) => postEvents(client, key, conversationId, events);

  const readEvents = async (conversationId: string, query = '') => {
    const response = await client.request
      .get(`/api/v1/conversations/${conversationId}/events${query}`)
      .set('X-Access-Token', owner.accessToken)
      .expect(200);
    return response.body as { items: { seq: number; event: Record<string, unknown> }[]; next_after_seq: number | null };
  };

  const readConversation = async (conversationId: string) =>
    (await client.request.get(`/api/v1/conversations/${conversationId}`).set('X-Access-Token', owner.accessToken).expect(200))
      .body as { execution_status: string | null; event_count: number; last_event_at: string | null };

  it('stores events of every kind and reads them back identical (encrypted_content as null), in order, with sequence numbers', async () => {
    const conversationId = randomUUID();
    const events = eventsOfEveryKind();
    const response = await post(conversationId, events).expect(200);
    expect(response.body).to.deep.equal({ success: true });

    const { items, next_after_seq } = await readEvents(conversationId);
    // encrypted_content is stored but never rendered: it reads back as null.
    const persisted = events
      .filter((e) => e.kind !== 'StreamingDeltaEvent')
      .map((e) =>
        e.responses_reasoning_item ? { ...e, responses_reasoning_item: { ...(e.responses_reasoning_item as object), encrypted_content: null } } : e,
      );
    expect(events.some((e) => (e.responses_reasoning_item as { encrypted_content?: unknown } | null)?.encrypted_content)).to.equal(true);
    expect(items.map((i) => i.seq)).to.deep.equal(persisted.map((_, index) => index + 1));
    expect(items.map((i) => i.event)).to.deep.equal(persisted);
    expect(next_after_seq).to.equal(null);
  });

  it('accepts the agent-server form of the id (32 hex digits) as the same conversation as the dashed form', async () => {
    const conversationId = randomUUID();
    await post(conversationId.replace(/-/g, ''), [minimalEvent('PauseEvent')]).expect(200);
    await post(conversationId.toUpperCase(), [minimalEvent('InterruptEvent')]).expect(200);
    const conversation = await readConversation(conversationId);
    expect(conversation.event_count).to.equal(2);
  });

  it('applies the schema defaults of each kind to stored events', async () => {
    const conversationId = randomUUID();
    await post(conversationId, [
      { kind: 'ACPToolCallEvent', id: 'e1', tool_call_id: 't', title: 'Read' },
      { kind: 'LLMCompletionLogEvent', id: 'e2', filename: 'f.json', log_data: '{}' },
      { kind: 'HookExecutionEvent', id: 'e3', hook_event_type: 'Stop', hook_command: 'x', success: true, exit_code: 0 },
      { kind: 'UserRejectObservation', id: 'e4', tool_name: 't', tool_call_id: 'c', action_id: 'a' },
      { kind: 'PauseEvent', id: 'e5' },
      (({ security_risk: _risk, source: _source, ...action }) => ({ ...action, id: 'e6' }))(minimalEvent('ActionEvent')),
    ]).expect(200);
    const events = (await readEvents(conversationId)).items.map((i) => i.event);
    expect(events[0]).to.include({ source: 'agent', is_error: false });
    expect(events[1]).to.include({ source: 'environment', model_name: 'unknown', usage_id: 'default' });
    expect(events[2]).to.include({ source: 'hook', blocked: false, stdout: '', stderr: '' });
    expect(events[3]).to.include({ source: 'environment', rejection_reason: 'User rejected the action', rejection_source: 'user' });
    expect(events[4]).to.include({ source: 'user' });
    expect(events[5]).to.include({ source: 'agent', security_risk: 'UNKNOWN' });
  });

  it('still accepts reasoning_details (an extension kept for producers that send it; the SDK at 611629e does not)', async () => {
    const conversationId = randomUUID();
    const withBlocks = minimalEvent('ActionEvent', { reasoning_details: [{ type: 'reasoning.encrypted', data: 'opaque' }] });
    await post(conversationId, [minimalEvent('ActionEvent'), withBlocks]).expect(200);
    const { items } = await readEvents(conversationId);
    expect(items.map((i) => i.event.reasoning_details)).to.deep.equal([null, [{ type: 'reasoning.encrypted', data: 'opaque' }]]);
  });

  it('gives an event without an id a server-assigned UUID', async () => {
    const conversationId = randomUUID();
    const { id: _dropped, ...withoutId } = minimalEvent('PauseEvent');
    await post(conversationId, [withoutId]).expect(200);
    const [stored] = (await readEvents(conversationId)).items;
    expect(stored!.event.id).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  it('acknowledges a redelivered batch and stores its events once (first write wins)', async () => {
    const conversationId = randomUUID();
    const batch = eventsOfEveryKind().slice(0, 5);
    await post(conversationId, batch).expect(200);
    const changed = { ...batch[1], sender: 'someone else' };
    await post(conversationId, [batch[0], changed, ...batch.slice(2)]).expect(200);
    const { items } = await readEvents(conversationId);
    expect(items).to.have.length(5);
    expect(items[1]!.event).to.deep.equal(batch[1]);
  });

  it('stores only the new events of a partly redelivered batch, continuing the sequence', async () => {
    const conversationId = randomUUID();
    const [a, b, c] = [minimalEvent('PauseEvent'), minimalEvent('InterruptEvent'), minimalEvent('CondensationRequest')];
    await post(conversationId, [a, b]).expect(200);
    await post(conversationId, [b, c, c]).expect(200);
    const { items } = await readEvents(conversationId);
    expect(items.map((i) => [i.seq, i.event.id])).to.deep.equal([
      [1, a.id],
      [2, b.id],
      [3, c.id],
    ]);
  });

  it('numbers events of concurrent batches densely, in the order each batch was committed', async () => {
    const conversationId = randomUUID();
    const batches = Array.from({ length: 8 }, () => [minimalEvent('PauseEvent'), minimalEvent('InterruptEvent')]);
    await Promise.all(batches.map((batch) => post(conversationId, batch).expect(200)));
    const { items } = await readEvents(conversationId);
    expect(items.map((i) => i.seq)).to.deep.equal(Array.from({ length: 16 }, (_, i) => i + 1));
    // Each batch's two events are adjacent: batches are appended whole.
    for (let i = 0; i < 16; i += 2) {
      const batch = batches.find((b) => b[0]!.id === items[i]!.event.id);
      expect(items[i + 1]!.event.id).to.equal(batch![1]!.id);
    }
  });

  describe('arbitrary agent output', () => {
    /** A terminal observation whose output holds `output` (JSON text of a string), and a state update holding `value`. */
    const batchText = (ids: [string, string], output: string, value: string) =>
      `[{"kind":"ObservationEvent","id":"${ids[0]}","source":"environment","tool_name":"terminal","tool_call_id":"call_1",` +
      `"action_id":"a1","observation":{"kind":"TerminalObservation","content":[{"type":"text","text":${output}}],"exit_code":0},"extended_content":[]},` +
      `{"kind":"ConversationStateUpdateEvent","id":"${ids[1]}","source":"environment","key":"stats","value":${value}}]`;

    const postText = (conversationId: string, text: string) => postEvents(client, owner.sessionApiKey, conversationId, text);

    it('stores \\u0000, lone surrogates and numbers a double cannot hold, and reads them back exactly', async () => {
      const conversationId = randomUUID();
      const ids: [string, string] = [randomUUID(), randomUUID()];
      const output = '"binary \\u0000\\u0001 output, \\ud800 lone high, \\udfff lone low, \\ud83d\\ude00 pair"';
      const value = '{"big":123456789012345678901234567890,"precise":0.1000000000000000055511151231257827,"huge":1e400,"ids":[18446744073709551615]}';
      const text = batchText(ids, output, value);
      await postText(conversationId, text).expect(200);

      const response = await client.request
        .get(`/api/v1/conversations/${conversationId}/events`)
        .set('X-Access-Token', owner.accessToken)
        .expect(200);
      // The literals themselves come back: a JSON parser in the test would round the numbers.
      for (const literal of ['\\u0000\\u0001', '\\ud800', '\\udfff', '123456789012345678901234567890', '0.1000000000000000055511151231257827', '1e400', '18446744073709551615']) {
        expect(response.text).to.include(literal);
      }
      const stored = (response.body as { items: { event: Record<string, unknown> }[] }).items.map((item) => item.event);
      const sent = JSON.parse(text) as Record<string, unknown>[];
      // What was sent, with the defaults of each kind filled in.
      expect(stored[0]).to.deep.include(sent[0]!);
      expect(stored[1]).to.deep.equal(sent[1]);
      expect(((stored[0]!.observation as { content: { text: string }[] }).content[0]!.text)).to.equal(
        'binary \u0000\u0001 output, \ud800 lone high, \udfff lone low, 😀 pair',
      );
    });

    it('acknowledges a redelivery of such a batch and stores it once', async () => {
      const conversationId = randomUUID();
      const text = batchText([randomUUID(), randomUUID()], '"\\u0000"', '{"n":123456789012345678901}');
      await postText(conversationId, text).expect(200);
      await postText(conversationId, text).expect(200);
      expect((await readConversation(conversationId)).event_count).to.equal(2);
    });

    it('refuses a body nested deeper than 1000 levels with a 422 json_invalid, and stores nothing', async () => {
      const conversationId = randomUUID();
      const deep = '['.repeat(1001) + ']'.repeat(1001);
      const response = await postText(conversationId, batchText([randomUUID(), randomUUID()], '"x"', deep)).expect(422);
      expect(response.body.detail[0]).to.deep.include({ msg: 'JSON decode error', type: 'json_invalid' });
      expect(response.body.detail[0].ctx.error).to.match(/nested deeper than 1000 levels/);
      await client.request.get(`/api/v1/conversations/${conversationId}`).set('X-Access-Token', owner.accessToken).expect(404);
    });

    for (const [label, id] of [
      ['\\u0000', 'abc\u0000'],
      ['a lone surrogate', '\ud800abc'],
      ['over 255 characters', 'x'.repeat(256)],
    ]) {
      it(`refuses an event id with ${label} (the id is a key, not payload) with a 422 on the id`, async () => {
        const response = await post(randomUUID(), [minimalEvent('PauseEvent', { id })]).expect(422);
        expect(response.body.detail).to.have.length(1);
        expect(response.body.detail[0].loc).to.deep.equal(['body', 0, 'id']);
      });
    }
  });

  it('never stores a StreamingDeltaEvent', async () => {
    const conversationId = randomUUID();
    await post(conversationId, [minimalEvent('StreamingDeltaEvent'), minimalEvent('StreamingDeltaEvent')]).expect(200);
    const conversation = await readConversation(conversationId);
    expect(conversation.event_count).to.equal(0);
    expect(conversation.last_event_at).to.equal(null);
  });

  describe('conversation execution_status', () => {
    const cases: [string, Record<string, unknown>[], string | null][] = [
      ['InterruptEvent → paused', [minimalEvent('InterruptEvent')], 'paused'],
      ['PauseEvent → paused', [minimalEvent('PauseEvent')], 'paused'],
      ['ConversationErrorEvent → error', [minimalEvent('ConversationErrorEvent')], 'error'],
      [
        'ConversationStateUpdateEvent key=execution_status → its value',
        [minimalEvent('ConversationStateUpdateEvent', { key: 'execution_status', value: 'waiting_for_confirmation' })],
        'waiting_for_confirmation',
      ],
      [
        'ConversationStateUpdateEvent key=full_state → value.execution_status',
        [minimalEvent('ConversationStateUpdateEvent', { key: 'full_state', value: { execution_status: 'finished', id: 'x' } })],
        'finished',
      ],
      [
        'AgentErrorEvent leaves it unchanged',
        [minimalEvent('ConversationStateUpdateEvent', { value: 'running' }), minimalEvent('AgentErrorEvent')],
        'running',
      ],
      [
        'the last status-changing event of a batch wins',
        [minimalEvent('PauseEvent'), minimalEvent('ConversationStateUpdateEvent', { value: 'running' })],
        'running',
      ],
      ['other kinds leave it null', [minimalEvent('MessageEvent'), minimalEvent('ActionEvent')], null],
    ];
    for (const [name, events, expected] of cases) {
      it(name, async () => {
        const conversationId = randomUUID();
        await post(conversationId, events).expect(200);
        expect((await readConversation(conversationId)).execution_status).to.equal(expected);
      });
    }

    it('a redelivered status event does not undo a later change', async () => {
      const conversationId = randomUUID();
      const pause = minimalEvent('PauseEvent');
      await post(conversationId, [pause]).expect(200);
      await post(conversationId, [minimalEvent('ConversationStateUpdateEvent', { value: 'running' })]).expect(200);
      await post(conversationId, [pause]).expect(200);
      expect((await readConversation(conversationId)).execution_status).to.equal('running');
    });
  });

  describe('authentication and ownership', () => {
    it('returns 401 without X-Session-API-Key', async () => {
      const response = await postEvents(client, null, randomUUID(), [minimalEvent('PauseEvent')]).expect(401);
      expect(response.body).to.deep.equal({ detail: 'Missing X-Session-API-Key header' });
    });

    it('returns 401 for an unknown session key', async () => {
      const response = await post(randomUUID(), [minimalEvent('PauseEvent')], 'apsk_unknown').expect(401);
      expect(response.body).to.deep.equal({ detail: 'Invalid X-Session-API-Key' });
    });

    it('returns 401 for an access token sent as a session key', async () => {
      await post(randomUUID(), [minimalEvent('PauseEvent')], owner.accessToken).expect(401);
    });

    it("returns 403 for a delivery to another user's conversation and stores nothing", async () => {
      const conversationId = randomUUID();
      await post(conversationId, [minimalEvent('PauseEvent')]).expect(200);
      const intruder = await createUserFixture();
      const response = await post(conversationId, [minimalEvent('InterruptEvent')], intruder.sessionApiKey).expect(403);
      expect(response.body).to.deep.equal({ detail: 'This conversation belongs to another organization' });
      expect((await readConversation(conversationId)).event_count).to.equal(1);
    });
  });

  it('stores nothing from a batch with one invalid event', async () => {
    const conversationId = randomUUID();
    await post(conversationId, [minimalEvent('PauseEvent'), { ...minimalEvent('TokenEvent'), prompt_token_ids: ['x'] }]).expect(422);
    await client.request.get(`/api/v1/conversations/${conversationId}`).set('X-Access-Token', owner.accessToken).expect(404);
  });

  it('never writes encrypted reasoning content or credentials to the log', async () => {
    await post(randomUUID(), eventsOfEveryKind()).expect(200);
    await post(randomUUID(), [{ ...minimalEvent('ActionEvent'), extra: 1 }]).expect(422);
    const logs = client.logs.join('');
    expect(logs).to.not.include('gAAAAA-secret-reasoning');
    expect(logs).to.not.include(owner.sessionApiKey);
  });
});

describe('POST /api/v1/webhooks/events/{conversation_id} while the database is down', () => {
  it('returns 503 with Retry-After so the agent-server retries the batch', async () => {
    // An ORM pointed at a port where nothing listens stands in for a database that went away.
    const orm = await MikroORM.init({ ...ormOptions('postgres://postgres@127.0.0.1:1/none'), connect: false });
    try {
      const { app } = await createApp({
        config: testConfig(),
        logger: createLogger('silent'),
        orm,
        database: { isReachable: async () => false },
      });
      const response = await supertest(app.callback())
        .post(webhookPath(randomUUID()))
        .set('X-Session-API-Key', 'apsk_whatever')
        .send([minimalEvent('PauseEvent')])
        .expect(503);
      expect(response.headers['retry-after']).to.equal('1');
      expect(response.body).to.deep.equal({ detail: 'The database is unavailable; retry later' });
    } finally {
      await orm.close(true);
    }
  });
});
