import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { postEvents, webhookPath } from '../helpers/webhook.ts';

type Detail = { loc: (string | number)[]; msg: string; type: string; input?: unknown; ctx?: Record<string, unknown> }[];

describe('422 HTTPValidationError (FastAPI shape)', () => {
  let client: TestApp;
  let user: UserFixture;
  before(async () => {
    client = await createTestApp();
  });
  beforeEach(async () => {
    user = await createUserFixture();
  });

  /** The 422's detail for a batch the contract refuses. */
  const detailOf = async (events: unknown, conversationId: string = randomUUID()) => {
    const response = await postEvents(client, user.sessionApiKey, conversationId, events).expect(422);
    return response.body.detail as Detail;
  };

  it('lists every problem of a batch at its exact loc, path parameter included', async () => {
    const { name: _name, ...toolCallWithoutName } = minimalEvent('ActionEvent').tool_call as Record<string, unknown>;
    const detail = await detailOf(
      [
        { ...minimalEvent('PauseEvent'), unexpected: true },
        { ...minimalEvent('ActionEvent'), tool_call: toolCallWithoutName },
        { ...minimalEvent('ActionEvent'), security_risk: 'EXTREME' },
      ],
      'not-a-uuid',
    );
    expect(detail).to.have.length(4);
    expect(detail).to.deep.include({
      loc: ['body', 0, 'unexpected'],
      msg: 'Extra inputs are not permitted',
      type: 'extra_forbidden',
      input: true,
    });
    expect(detail).to.deep.include({
      loc: ['body', 1, 'tool_call', 'name'],
      msg: 'Field required',
      type: 'missing',
      input: toolCallWithoutName,
    });
    expect(detail).to.deep.include({
      loc: ['body', 2, 'security_risk'],
      msg: "Input should be 'UNKNOWN', 'LOW', 'MEDIUM' or 'HIGH'",
      type: 'enum',
      input: 'EXTREME',
      ctx: { expected: "'UNKNOWN', 'LOW', 'MEDIUM' or 'HIGH'" },
    });
    expect(detail).to.deep.include({
      loc: ['path', 'conversation_id'],
      msg: 'Input should be a valid UUID',
      type: 'uuid_parsing',
      input: 'not-a-uuid',
    });
  });

  const cases: [string, unknown, Partial<Detail[number]>][] = [
    ['a missing required field → missing', [{ kind: 'AgentErrorEvent', tool_name: 't', tool_call_id: 'c' }], { loc: ['body', 0, 'error'], type: 'missing' }],
    ['source required for MessageEvent → missing', [{ ...minimalEvent('MessageEvent'), source: undefined }], { loc: ['body', 0, 'source'], type: 'missing' }],
    ['an unknown kind → union_tag_invalid', [{ kind: 'NoSuchEvent' }], { loc: ['body', 0], type: 'union_tag_invalid' }],
    ['no kind → union_tag_not_found', [{ id: 'x' }], { loc: ['body', 0], type: 'union_tag_not_found' }],
    ['an event that is not an object → model_attributes_type', ['PauseEvent'], { loc: ['body', 0], type: 'model_attributes_type' }],
    ['a string where an integer belongs → int_type', [{ ...minimalEvent('HookExecutionEvent'), exit_code: 'zero' }], { loc: ['body', 0, 'exit_code'], type: 'int_type' }],
    ['a number where a string belongs → string_type', [{ ...minimalEvent('AgentErrorEvent'), error: 42 }], { loc: ['body', 0, 'error'], type: 'string_type' }],
    ['a string where a boolean belongs → bool_type', [{ ...minimalEvent('HookExecutionEvent'), success: 'yes' }], { loc: ['body', 0, 'success'], type: 'bool_type' }],
    ['a wrong enum value in a nested object → enum', [{ ...minimalEvent('ActionEvent'), tool_call: { ...(minimalEvent('ActionEvent').tool_call as object), origin: 'x' } }], { loc: ['body', 0, 'tool_call', 'origin'], type: 'enum' }],
    ['a wrong hook_event_type → enum', [{ ...minimalEvent('HookExecutionEvent'), hook_event_type: 'Nope' }], { loc: ['body', 0, 'hook_event_type'], type: 'enum' }],
    ['an unknown action kind → enum', [{ ...minimalEvent('ActionEvent'), action: { kind: 'RmRfAction' } }], { loc: ['body', 0, 'action', 'kind'], type: 'enum' }],
    ['a wrong source → enum', [{ ...minimalEvent('PauseEvent'), source: 'robot' }], { loc: ['body', 0, 'source'], type: 'enum' }],
    ['a critic score above 1 → less_than_equal', [{ ...minimalEvent('ActionEvent'), critic_result: { score: 1.5, message: null } }], { loc: ['body', 0, 'critic_result', 'score'], type: 'less_than_equal', ctx: { le: 1 } }],
    ['a critic result without the message key → missing', [{ ...minimalEvent('ActionEvent'), critic_result: { score: 0.5 } }], { loc: ['body', 0, 'critic_result', 'message'], type: 'missing' }],
    ['a negative summary_offset → greater_than_equal', [{ ...minimalEvent('Condensation'), summary_offset: -1 }], { loc: ['body', 0, 'summary_offset'], type: 'greater_than_equal', ctx: { ge: 0 } }],
    ['repeated forgotten_event_ids → unique_items', [{ ...minimalEvent('Condensation'), forgotten_event_ids: ['a', 'b', 'a'] }], { loc: ['body', 0, 'forgotten_event_ids'], type: 'unique_items' }],
    ['a float token id → int_type with an integer index in loc', [{ ...minimalEvent('TokenEvent'), response_token_ids: [1, 2.5] }], { loc: ['body', 0, 'response_token_ids', 1], type: 'int_type' }],
    ['an unknown property of a TextContent → extra_forbidden', [{ ...minimalEvent('SystemPromptEvent'), system_prompt: { text: 'x', bold: true } }], { loc: ['body', 0, 'system_prompt', 'bold'], type: 'extra_forbidden' }],
    ['a text content without text → missing, not an ImageContent error', [{ ...minimalEvent('MessageEvent'), llm_message: { role: 'user', content: [{ type: 'text' }] } }], { loc: ['body', 0, 'llm_message', 'content', 0, 'text'], type: 'missing' }],
    ['a content item of an unknown type → union_tag_invalid', [{ ...minimalEvent('MessageEvent'), llm_message: { role: 'user', content: [{ type: 'video' }] } }], { loc: ['body', 0, 'llm_message', 'content', 0, 'type'], type: 'union_tag_invalid' }],
    ['a thinking block without thinking → missing', [{ ...minimalEvent('ActionEvent'), thinking_blocks: [{ type: 'thinking' }] }], { loc: ['body', 0, 'thinking_blocks', 0, 'thinking'], type: 'missing' }],
    ['kind of the wrong case → union_tag_invalid', [{ ...minimalEvent('PauseEvent'), kind: 'pauseevent' }], { loc: ['body', 0], type: 'union_tag_invalid' }],
    ['a body that is not an array → list_type', { kind: 'PauseEvent' }, { loc: ['body'], type: 'list_type' }],
  ];
  for (const [name, body, expected] of cases) {
    it(`reports ${name}`, async () => {
      const detail = await detailOf(body);
      expect(detail, JSON.stringify(detail)).to.have.length(1);
      expect(detail[0]).to.deep.include(expected);
      expect(detail[0]!.msg).to.be.a('string').and.not.be.empty;
    });
  }

  it('reports a missing body as loc ["body"] type missing', async () => {
    const response = await client.request.post(webhookPath(randomUUID())).set('X-Session-API-Key', user.sessionApiKey).expect(422);
    expect(response.body).to.deep.equal({ detail: [{ loc: ['body'], msg: 'Field required', type: 'missing' }] });
  });

  it('reports malformed JSON as json_invalid', async () => {
    const response = await postEvents(client, user.sessionApiKey, randomUUID(), '[{"kind": "PauseEvent",').expect(422);
    const [error] = response.body.detail as Detail;
    expect(error).to.deep.include({ msg: 'JSON decode error', type: 'json_invalid' });
    expect(error!.loc[0]).to.equal('body');
  });

  it('reports a body that is not valid UTF-8 as json_invalid instead of replacing the bad bytes', async () => {
    // 0xC3 0x28 is not a UTF-8 sequence; a lenient decoder would store U+FFFD in its place.
    const body = Buffer.concat([Buffer.from('[{"kind": "PauseEvent", "id": "'), Buffer.from([0xc3, 0x28]), Buffer.from('"}]')]);
    const response = await client.request
      .post(webhookPath(randomUUID()))
      .set('X-Session-API-Key', user.sessionApiKey)
      .set('Content-Type', 'application/json')
      // superagent would JSON-encode a Buffer; the bytes must go out as they are.
      .serialize(((bytes: Buffer) => bytes) as unknown as (body: unknown) => string)
      .send(body)
      .expect(422);
    const [error] = response.body.detail as Detail;
    expect(error).to.deep.include({ loc: ['body', 0], msg: 'JSON decode error', type: 'json_invalid' });
    expect(error!.ctx).to.deep.equal({ error: 'Invalid UTF-8 in the request body' });
  });

  it('caps the error list of a huge bad batch at MAX_VALIDATION_ERRORS', async () => {
    const batch = Array.from({ length: 1000 }, () => ({ kind: 'PauseEvent', bogus: 1 }));
    const detail = await detailOf(batch);
    expect(detail).to.have.length(100);
    expect(detail[99]!.loc).to.deep.equal(['body', 99, 'bogus']);
  });

  it('reports bad query parameters with loc ["query", name]', async () => {
    const response = await client.request
      .get(`/api/v1/conversations/${randomUUID()}/events?limit=0&kind=Nope`)
      .set('X-Access-Token', user.accessToken)
      .expect(422);
    const detail = response.body.detail as Detail;
    expect(detail.map((d) => [d.loc, d.type])).to.have.deep.members([
      [['query', 'limit'], 'greater_than_equal'],
      [['query', 'kind', 0], 'enum'],
    ]);
  });
});

describe('protocol errors', () => {
  let client: TestApp;
  let user: UserFixture;
  before(async () => {
    client = await createTestApp({ bodyLimitBytes: 2048 });
  });
  beforeEach(async () => {
    user = await createUserFixture();
  });

  it('returns 404 {detail} for an unknown route', async () => {
    const response = await client.request.get('/api/v1/nothing-here').expect(404);
    expect(response.body).to.deep.equal({ detail: 'No route for GET /api/v1/nothing-here' });
  });

  it('returns 405 {detail} with Allow for a wrong method', async () => {
    const response = await client.request.get(webhookPath(randomUUID())).expect(405);
    expect(response.headers.allow).to.equal('POST');
    expect(response.body.detail).to.be.a('string');
  });

  it('returns 415 {detail} for a body that is not JSON', async () => {
    const response = await client.request
      .post(webhookPath(randomUUID()))
      .set('X-Session-API-Key', user.sessionApiKey)
      .set('Content-Type', 'text/plain')
      .send('[]')
      .expect(415);
    expect(response.body).to.deep.equal({ detail: 'Content-Type must be application/json' });
  });

  it('returns 413 {detail} for a body over the configured limit', async () => {
    const events = [minimalEvent('AgentErrorEvent', { error: 'x'.repeat(2048) }), minimalEvent('AgentErrorEvent', { error: 'y'.repeat(2048) })];
    const response = await postEvents(client, user.sessionApiKey, randomUUID(), events).expect(413);
    // One event alone may be larger (WEBHOOK_SINGLE_EVENT_LIMIT_BYTES: test/api/webhooks.limits.test.ts).
    expect(response.body).to.deep.equal({ detail: `A batch of more than one event may hold at most 2048 bytes (a single event up to ${64 * 1024 * 1024})` });
  });

  it('answers 401 before reading the body of a request without a credential', async () => {
    const response = await client.request
      .post(webhookPath(randomUUID()))
      .set('Content-Type', 'text/plain')
      .send('x'.repeat(4096))
      .expect(401);
    expect(response.body).to.deep.equal({ detail: 'Missing X-Session-API-Key header' });
  });

  it('keeps a well-formed X-Request-Id and replaces anything else', async () => {
    const kept = await client.request.get('/healthz').set('X-Request-Id', 'abc-123').expect(200);
    expect(kept.headers['x-request-id']).to.equal('abc-123');
    const replaced = await client.request.get('/healthz').set('X-Request-Id', 'a b\tc').expect(200);
    expect(replaced.headers['x-request-id']).to.match(/^[0-9a-f-]{36}$/);
  });

  it('never answers with a stack trace', async () => {
    const response = await postEvents(client, null, 'x', '{');
    expect(JSON.stringify(response.body)).to.not.match(/at .*\.ts:\d+/);
  });
});
