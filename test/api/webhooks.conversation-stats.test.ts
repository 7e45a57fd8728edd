import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { postEvents } from '../helpers/webhook.ts';

/** The agent-server's ConversationInfo, written by the SDK's own models (test/fixtures/agent-server/generator/). */
const sdkInfo = JSON.parse(readFileSync(new URL('../fixtures/agent-server/conversation-info.json', import.meta.url), 'utf8')) as Record<string, unknown>;

type Usage = { model_name: string; accumulated_cost: number; max_budget_per_task: number | null; accumulated_token_usage: Record<string, unknown> };

/** The fixture's info for a new conversation, as today's agent-server sends it: `metrics` null, the costs in `stats`. */
function statsOnlyInfo(usages?: Record<string, Usage>): Record<string, unknown> {
  const info = structuredClone(sdkInfo);
  info.id = randomUUID();
  info.metrics = null;
  if (usages) info.stats = { usage_to_metrics: usages };
  return info;
}

const usage = (model: string, cost: number, prompt: number, contextWindow: number): Usage => ({
  model_name: model,
  accumulated_cost: cost,
  max_budget_per_task: null,
  accumulated_token_usage: {
    model: model,
    prompt_tokens: prompt,
    completion_tokens: 10,
    cache_read_tokens: 0,
    cache_write_tokens: 0,
    reasoning_tokens: 1,
    context_window: contextWindow,
    per_turn_token: prompt + 10,
    response_id: '',
  },
});

describe('POST /api/v1/webhooks/conversations: metrics from `stats` (metrics null, as today\'s agent-server sends)', () => {
  let client: TestApp;
  let owner: UserFixture;
  before(async () => {
    client = await createTestApp();
  });
  beforeEach(async () => {
    owner = await createUserFixture();
  });

  const postInfo = (info: Record<string, unknown>) =>
    client.request.post('/api/v1/webhooks/conversations').set('X-Session-API-Key', owner.sessionApiKey).send(info);
  const conversation = async (id: string) =>
    (await client.request.get(`/api/v1/conversations/${id}`).set('X-Access-Token', owner.accessToken).expect(200)).body as Record<string, unknown>;

  it('shows the same metrics whether the agent-server sends them or only their stats', async () => {
    const withMetrics = { ...structuredClone(sdkInfo), id: randomUUID() };
    const statsOnly = statsOnlyInfo();
    await postInfo(withMetrics).expect(201);
    await postInfo(statsOnly).expect(201);
    const a = await conversation(withMetrics.id as string);
    const b = await conversation(statsOnly.id as string);
    expect(b.metrics).to.deep.equal(sdkInfo.metrics);
    expect(b.metrics).to.deep.equal(a.metrics);
    // One source of truth for spend, charged once: the ledger, from stats, either way.
    expect(b.accumulated_cost_micro_usd).to.equal(a.accumulated_cost_micro_usd).and.to.equal(12_300);
  });

  it('sums several usages as the OpenHands app does: costs and counts added, largest context window, latest turn', async () => {
    const info = statsOnlyInfo({ agent: usage('model-a', 0.25, 1000, 200_000), condenser: usage('model-b', 0.5, 300, 128_000) });
    await postInfo(info).expect(201);
    const shown = await conversation(info.id as string);
    expect(shown.metrics).to.deep.equal({
      accumulated_cost: 0.75,
      max_budget_per_task: null,
      accumulated_token_usage: {
        model: 'model-a',
        prompt_tokens: 1300,
        completion_tokens: 20,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        reasoning_tokens: 2,
        context_window: 200_000,
        per_turn_token: 310,
        response_id: '',
      },
    });
    expect(shown.accumulated_cost_micro_usd).to.equal(750_000);
  });

  it('keeps the metrics current with a ConversationStateUpdateEvent of key "stats", without charging it again', async () => {
    const info = statsOnlyInfo({ agent: usage('model-a', 0.25, 1000, 200_000) });
    await postInfo(info).expect(201);
    const update = {
      kind: 'ConversationStateUpdateEvent',
      id: randomUUID(),
      source: 'environment',
      key: 'stats',
      value: { usage_to_metrics: { agent: usage('model-a', 0.4, 1600, 200_000) } },
    };
    await postEvents(client, owner.sessionApiKey, (info.id as string).replace(/-/g, ''), [update]).expect(200);
    const shown = await conversation(info.id as string);
    expect(shown.metrics).to.deep.include({ model_name: 'model-a', accumulated_cost: 0.4 });
    expect((shown.metrics as { accumulated_token_usage: { prompt_tokens: number } }).accumulated_token_usage.prompt_tokens).to.equal(1600);
    // The ledger is charged from ConversationInfo posts only.
    expect(shown.accumulated_cost_micro_usd).to.equal(250_000);
  });

  it('shows metrics from a "stats" state update before any ConversationInfo, and ignores one that is not shaped as stats', async () => {
    const id = randomUUID();
    const post = (value: unknown) =>
      postEvents(client, owner.sessionApiKey, id, [{ kind: 'ConversationStateUpdateEvent', id: randomUUID(), key: 'stats', value }]).expect(200);
    await post({ usage_to_metrics: { agent: 'not metrics' } });
    expect((await conversation(id)).metrics).to.equal(null);
    await post({ usage_to_metrics: { agent: usage('model-a', 0.1, 5, 1000) } });
    expect((await conversation(id)).metrics).to.deep.include({ accumulated_cost: 0.1 });
    // The export's header still says that the agent-server sent no ConversationInfo.
    const exported = await client.request.get(`/api/v1/conversations/${id}/export`).set('X-Access-Token', owner.accessToken).buffer(true).parse((res, done) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => done(null, text));
    });
    expect(JSON.parse((exported.body as string).split('\n')[0]!).info).to.equal(null);
  });
});
