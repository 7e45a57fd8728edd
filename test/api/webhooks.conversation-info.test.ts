import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { postEvents } from '../helpers/webhook.ts';

/**
 * The agent-server's ConversationInfo, as `ConversationWebhookSubscriber.post_conversation_info`
 * serializes it (`model_dump(mode="json")`, software-agent-sdk 611629e); see
 * test/fixtures/agent-server/generator/.
 */
const infoText = readFileSync(new URL('../fixtures/agent-server/conversation-info.json', import.meta.url), 'utf8');
/** A ConversationInfo document, edited freely by the tests. */
type Info = Record<string, any>;

/** The fixture for a conversation of our choosing, with secrets where a real one can carry them. */
function conversationInfo(conversationId: string, changes: Info = {}): Info {
  const info = JSON.parse(infoText) as Info;
  info.id = conversationId;
  info.agent.llm.api_key = 'sk-ant-api03-REAL-LLM-KEY';
  info.agent.llm.aws_secret_access_key = 'aws-REAL-SECRET';
  info.secret_registry = { secret_sources: { GITHUB_TOKEN: { kind: 'StaticSecret', value: 'ghp_REAL_GITHUB' } } };
  info.workspace.headers = { 'X-Session-API-Key': 'sess-REAL-KEY', Accept: 'application/json' };
  info.agent.mcp_config = { mcpServers: { fetch: { env: { apiKey: 'mcp-REAL-KEY', PASSWORD: 'pw-REAL' } } } };
  return { ...info, ...changes };
}
const SECRETS = ['sk-ant-api03-REAL-LLM-KEY', 'aws-REAL-SECRET', 'ghp_REAL_GITHUB', 'sess-REAL-KEY', 'mcp-REAL-KEY', 'pw-REAL'];

const storedInfo = async (conversationId: string) => {
  const rows = await testDatabase()
    .orm.em.getConnection()
    .execute<{ info: string }[]>('select info::text as info from conversation_infos where conversation_id = ?', [conversationId]);
  return rows[0]?.info;
};

describe('POST /api/v1/webhooks/conversations', () => {
  let client: TestApp;
  let owner: UserFixture;
  before(async () => {
    client = await createTestApp();
  });
  beforeEach(async () => {
    owner = await createUserFixture();
  });

  const post = (body: unknown, key: string | null = owner.sessionApiKey) => {
    const request = client.request.post('/api/v1/webhooks/conversations');
    return (key === null ? request : request.set('X-Session-API-Key', key)).send(body as object);
  };
  const getConversation = async (conversationId: string, user = owner) =>
    (await client.request.get(`/api/v1/conversations/${conversationId}`).set('X-Access-Token', user.accessToken).expect(200)).body;

  it('creates a new conversation owned by the caller (201) and shows its title and metrics', async () => {
    const conversationId = randomUUID();
    const info = conversationInfo(conversationId);
    const response = await post(info).expect(201);
    expect(response.body).to.include({ id: conversationId, title: 'Fix the failing test', execution_status: 'running', event_count: 0 });
    expect(response.body.metrics).to.deep.equal(info.metrics);

    const conversation = await getConversation(conversationId);
    expect(conversation).to.deep.equal(response.body);
    const list = await client.request.get('/api/v1/conversations').set('X-Access-Token', owner.accessToken).expect(200);
    expect(list.body.items).to.deep.equal([conversation]);
  });

  it('updates an existing conversation of the caller (200) with the latest title, status and metrics', async () => {
    const conversationId = randomUUID();
    await post(conversationInfo(conversationId)).expect(201);
    const later = conversationInfo(conversationId, {
      title: 'Fixed the failing test',
      execution_status: 'finished',
      updated_at: '2026-11-23T18:09:00Z',
      metrics: { ...conversationInfo(conversationId).metrics, accumulated_cost: 0.5 },
    });
    await post(later).expect(200);
    const conversation = await getConversation(conversationId);
    expect(conversation).to.include({ title: 'Fixed the failing test', execution_status: 'finished' });
    expect(conversation.metrics.accumulated_cost).to.equal(0.5);
  });

  it('acknowledges and ignores a post older than the info already stored (a late retry)', async () => {
    const conversationId = randomUUID();
    await post(conversationInfo(conversationId, { title: 'new', execution_status: 'finished', updated_at: '2026-11-23T18:10:00Z' })).expect(201);
    await post(conversationInfo(conversationId, { title: 'old', execution_status: 'running', updated_at: '2026-11-23T18:09:59.999999' })).expect(200);
    expect(await getConversation(conversationId)).to.include({ title: 'new', execution_status: 'finished' });
  });

  it('updates a conversation that the event webhook created, and the event webhook keeps working after it', async () => {
    const conversationId = randomUUID();
    const hex = conversationId.replace(/-/g, '');
    await postEvents(client, owner.sessionApiKey, hex, [minimalEvent('PauseEvent')]).expect(200);
    await post(conversationInfo(hex)).expect(200);
    await postEvents(client, owner.sessionApiKey, hex, [minimalEvent('InterruptEvent')]).expect(200);
    expect(await getConversation(conversationId)).to.include({ title: 'Fix the failing test', event_count: 2, execution_status: 'paused' });
  });

  it('returns 401 without X-Session-API-Key or with an unknown one, and stores nothing', async () => {
    const conversationId = randomUUID();
    await post(conversationInfo(conversationId), null).expect(401);
    await post(conversationInfo(conversationId), 'sess_unknown').expect(401);
    await post(conversationInfo(conversationId), owner.accessToken).expect(401);
    expect(await storedInfo(conversationId)).to.equal(undefined);
  });

  it("returns 403 for another user's conversation and changes nothing", async () => {
    const conversationId = randomUUID();
    await post(conversationInfo(conversationId)).expect(201);
    const intruder = await createUserFixture();
    const response = await post(conversationInfo(conversationId, { title: 'hijacked', updated_at: '2027-01-01T00:00:00Z' }), intruder.sessionApiKey).expect(403);
    expect(response.body).to.deep.equal({ detail: 'This conversation belongs to another organization' });
    expect((await getConversation(conversationId)).title).to.equal('Fix the failing test');
  });

  it('stores the info as sent minus every secret-looking key, at any depth', async () => {
    const conversationId = randomUUID();
    const info = conversationInfo(conversationId);
    await post(info).expect(201);
    const stored = (await storedInfo(conversationId))!;
    for (const secret of SECRETS) expect(stored).not.to.contain(secret);

    const expected = conversationInfo(conversationId);
    delete expected.agent.llm.api_key;
    delete expected.agent.llm.aws_secret_access_key;
    delete expected.secret_registry;
    delete expected.workspace.headers['X-Session-API-Key'];
    delete expected.agent.mcp_config.mcpServers.fetch.env.apiKey;
    delete expected.agent.mcp_config.mcpServers.fetch.env.PASSWORD;
    // Null credentials and token counts are not secrets: they stay.
    expect(expected.agent.llm).to.include({ aws_session_token: null, max_output_tokens: null });
    expect(expected.metrics.accumulated_token_usage.per_turn_token).to.equal(1500);
    expect(JSON.parse(stored)).to.deep.equal(expected);
  });

  it('never writes the info or its secrets to the log', async () => {
    const conversationId = randomUUID();
    await post(conversationInfo(conversationId)).expect(201);
    await post(conversationInfo(conversationId, { id: 'not-a-uuid' })).expect(422);
    const logged = client.logs.join('\n');
    for (const secret of [...SECRETS, 'Fix the failing test']) expect(logged).not.to.contain(secret);
  });

  it('keeps \\u0000 and lone surrogates of a title exactly (a title is model output)', async () => {
    const conversationId = randomUUID();
    const title = 'bin\u0000ary \ud800 title';
    await post(conversationInfo(conversationId, { title })).expect(201);
    const response = await client.request.get(`/api/v1/conversations/${conversationId}`).set('X-Access-Token', owner.accessToken).expect(200);
    expect(response.text).to.contain(JSON.stringify(title));
    expect(JSON.parse((await storedInfo(conversationId))!).title).to.equal(title);
  });

  describe('returns 422 for what the fields we use cannot hold, and stores nothing', () => {
    const cases: [string, Info, (string | number)[], string][] = [
      ['a missing id', { id: undefined }, ['body', 'id'], 'missing'],
      ['an id that is not a UUID', { id: 'conversation-1' }, ['body', 'id'], 'uuid_parsing'],
      ['an unknown execution_status', { execution_status: 'exploded' }, ['body', 'execution_status'], 'enum'],
      ['a title that is not a string', { title: 42 }, ['body', 'title'], 'string_type'],
      ['an updated_at that is not a datetime', { updated_at: 'yesterday' }, ['body', 'updated_at'], 'string_pattern_mismatch'],
      ['an updated_at before year 1', { updated_at: '0000-06-01T00:00:00Z' }, ['body', 'updated_at'], 'datetime_from_date_parsing'],
      ['an unknown property in metrics', { metrics: { model_name: 'm', accumulated_cost: 1, cost_in_euros: 1 } }, ['body', 'metrics', 'cost_in_euros'], 'extra_forbidden'],
      ['a token count that is not an integer in stats', { stats: { usage_to_metrics: { agent: { token_usages: [{ prompt_tokens: 1.5 }] } } } }, ['body', 'stats', 'usage_to_metrics', 'agent', 'token_usages', 0, 'prompt_tokens'], 'int_type'],
    ];
    for (const [label, change, loc, type] of cases) {
      it(label, async () => {
        const conversationId = randomUUID();
        const body = conversationInfo(conversationId, change);
        const response = await post(JSON.parse(JSON.stringify(body))).expect(422);
        const detail = response.body.detail as { loc: (string | number)[]; type: string }[];
        expect(detail.map((d) => [d.loc, d.type]), JSON.stringify(detail)).to.deep.include([loc, type]);
        for (const secret of SECRETS) expect(response.text).not.to.contain(secret);
        expect(await storedInfo(conversationId)).to.equal(undefined);
      });
    }
  });
});
