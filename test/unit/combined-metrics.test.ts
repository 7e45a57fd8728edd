import { expect } from 'chai';
import { combinedMetricsOf, statsOfStateUpdate } from '../../src/conversations/combined-metrics.ts';

describe('combinedMetricsOf (a conversation\'s metrics from its stats)', () => {
  const tokens = (prompt: number, contextWindow: number) => ({
    model: 'm',
    prompt_tokens: prompt,
    completion_tokens: 1,
    cache_read_tokens: 2,
    cache_write_tokens: 3,
    reasoning_tokens: 4,
    context_window: contextWindow,
    per_turn_token: prompt + 1,
    response_id: '',
  });

  it('is null without usages, and for anything not shaped as the SDK\'s ConversationStats', () => {
    for (const stats of [undefined, null, {}, { usage_to_metrics: {} }, { usage_to_metrics: [] }, { usage_to_metrics: { a: 'x' } }, { usage_to_metrics: { a: { accumulated_cost: -1 } } }, { usage_to_metrics: { a: { accumulated_cost: '1' } } }]) {
      expect(combinedMetricsOf(stats), JSON.stringify(stats)).to.equal(null);
    }
  });

  it('adds costs and counts, keeps the first budget, the largest window and the latest turn, the model when all share it', () => {
    const metrics = combinedMetricsOf({
      usage_to_metrics: {
        agent: { model_name: 'm', accumulated_cost: 0.1, max_budget_per_task: null, accumulated_token_usage: tokens(10, 1000) },
        condenser: { model_name: 'm', accumulated_cost: 0.2, max_budget_per_task: 5, accumulated_token_usage: tokens(20, 500) },
      },
    });
    expect(metrics).to.deep.equal({
      model_name: 'm',
      accumulated_cost: 0.1 + 0.2,
      max_budget_per_task: 5,
      accumulated_token_usage: { ...tokens(30, 1000), completion_tokens: 2, cache_read_tokens: 4, cache_write_tokens: 6, reasoning_tokens: 8, per_turn_token: 21 },
    });
  });

  it('drops what a TokenUsage does not hold (the result must fit MetricsSnapshot)', () => {
    const metrics = combinedMetricsOf({ usage_to_metrics: { a: { model_name: 'x', accumulated_cost: 1, accumulated_token_usage: { prompt_tokens: 1, secret: 'y', completion_tokens: 'z' } } } });
    expect(metrics!.accumulated_token_usage).to.deep.equal({ prompt_tokens: 1 });
  });

  it('reads stats from a state update of key "stats" or from a full_state snapshot', () => {
    expect(statsOfStateUpdate({ kind: 'ConversationStateUpdateEvent', key: 'stats', value: 1 })).to.equal(1);
    expect(statsOfStateUpdate({ kind: 'ConversationStateUpdateEvent', key: 'full_state', value: { stats: 2 } })).to.equal(2);
    expect(statsOfStateUpdate({ kind: 'ConversationStateUpdateEvent', key: 'execution_status', value: 'running' })).to.equal(undefined);
    expect(statsOfStateUpdate({ kind: 'PauseEvent', key: 'stats', value: 1 })).to.equal(undefined);
  });
});
