import { expect } from 'chai';
import { parseJson } from '../../src/lossless-json.ts';
import { microUsdOfDecimal, usdOf, usdTextOf } from '../../src/spend/money.ts';
import { usageCostsOf } from '../../src/spend/spend-ledger.ts';

describe('money: micro-dollars from the JSON text of a cost', () => {
  it('rounds decimal literals to the nearest micro-dollar, half up, exponents included (Python writes 1.23e-05)', () => {
    const cases: [string, bigint][] = [
      ['0', 0n],
      ['-0', 0n],
      ['0.0123', 12_300n],
      ['1.23e-05', 12n],
      ['1.25e-05', 13n],
      ['5e-7', 1n],
      ['4.999999999999999999e-7', 0n],
      ['0.0000015', 2n],
      ['1e-400', 0n],
      ['-1e-400', 0n],
      ['1000000', 1_000_000_000_000n],
      ['1e6', 1_000_000_000_000n],
      ['0.1234565', 123_457n],
      ['1.00000049999999999999999', 1_000_000n],
      ['12.3E+1', 123_000_000n],
    ];
    for (const [literal, micros] of cases) expect(microUsdOfDecimal(literal), literal).to.equal(micros);
  });

  it('refuses a negative amount and text that is not a number', () => {
    expect(() => microUsdOfDecimal('-0.01')).to.throw(RangeError);
    expect(() => microUsdOfDecimal('NaN')).to.throw(RangeError);
  });

  it('writes micro-dollars as dollars with at most 6 decimals, negative ones too', () => {
    expect([0n, 12_300n, 1_000_000n, 24_987_700n, -250_000n, 1n].map(usdTextOf)).to.deep.equal(['0', '0.0123', '1', '24.9877', '-0.25', '0.000001']);
    expect(JSON.stringify([usdOf(123_457n), usdOf(-1n), usdOf(999_999_999_999_999n)])).to.equal('[0.123457,-0.000001,999999999.999999]');
  });

  it('keeps labels a text column and an index can hold: U+FFFD for NUL and lone surrogates, 255 characters at most', () => {
    const info = { stats: { usage_to_metrics: { 'a\u0000b\ud800': { model_name: '😀'.repeat(300), accumulated_cost: 1 } } } };
    const [usage] = usageCostsOf(info);
    expect(usage!.usageId).to.equal('a\ufffdb\ufffd');
    expect(usage!.modelName).to.equal('😀'.repeat(255));
  });

  it('reads tokens and LLM calls beside the cost: prompt and completion tokens, one call per token usage; a count that is not one is unknown', () => {
    const info = {
      stats: {
        usage_to_metrics: {
          agent: { model_name: 'm', accumulated_cost: 1, accumulated_token_usage: { prompt_tokens: 1200, completion_tokens: 300 }, token_usages: [{}, {}] },
          odd: { accumulated_cost: 0, accumulated_token_usage: { prompt_tokens: -1, completion_tokens: 1.5 } },
        },
      },
    };
    expect(usageCostsOf(info)).to.deep.equal([
      { usageId: 'agent', modelName: 'm', cumulativeMicroUsd: 1_000_000n, tokensIn: 1200n, tokensOut: 300n, llmCalls: 2n },
      { usageId: 'odd', modelName: 'unknown', cumulativeMicroUsd: 0n, tokensIn: undefined, tokensOut: undefined, llmCalls: undefined },
    ]);
  });

  it('reads each usage cost of a conversation info from the literal as sent, not from the double', () => {
    const info = parseJson(
      '{"stats":{"usage_to_metrics":{"agent":{"model_name":"m","accumulated_cost":0.00000049999999999999999},"condenser":{"accumulated_cost":2.5e-7},"other":{"model_name":"x"}}}}',
    ) as Parameters<typeof usageCostsOf>[0];
    expect(usageCostsOf(info)).to.deep.equal([
      { usageId: 'agent', modelName: 'm', cumulativeMicroUsd: 0n, tokensIn: undefined, tokensOut: undefined, llmCalls: undefined },
      { usageId: 'condenser', modelName: 'unknown', cumulativeMicroUsd: 0n, tokensIn: undefined, tokensOut: undefined, llmCalls: undefined },
    ]);
  });
});
