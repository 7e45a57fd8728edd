import { expect } from 'chai';
import { balance, DEFAULT_GLOB, splitArguments, totalsOf } from '../../scripts/lib/test-shards.ts';

describe("npm test's shards (scripts/lib/test-shards.ts)", () => {
  it('deals the files longest first to the least loaded shard, a file without a time counting as the median', () => {
    const timings = { 'a.test.ts': 100, 'b.test.ts': 60, 'c.test.ts': 50, 'd.test.ts': 10, 'e.test.ts': 5 };
    const shards = balance(['e.test.ts', 'd.test.ts', 'c.test.ts', 'b.test.ts', 'a.test.ts', 'new.test.ts'], 2, timings);
    // a (100) | b (60) + c (50) | then new (the median, 50) to the first, d and e to the second.
    expect(shards.map((shard) => shard.files)).to.deep.equal([
      ['a.test.ts', 'new.test.ts'],
      ['b.test.ts', 'c.test.ts', 'd.test.ts', 'e.test.ts'],
    ]);
    expect(shards.map((shard) => shard.expected)).to.deep.equal([150, 125]);
    expect(balance(['x.test.ts'], 3, {}).map((shard) => shard.files.length)).to.deep.equal([1, 0, 0]);
  });

  it('sends files and globs to the shards and everything else, values of options included, to each mocha', () => {
    expect(splitArguments([])).to.deep.equal({ patterns: [DEFAULT_GLOB], options: [] });
    expect(splitArguments(['--grep', 'retention'])).to.deep.equal({ patterns: [DEFAULT_GLOB], options: ['--grep', 'retention'] });
    expect(splitArguments(['test/unit/*.test.ts', '--bail', 'test/api/health.test.ts', '--timeout=5000'])).to.deep.equal({
      patterns: ['test/unit/*.test.ts', 'test/api/health.test.ts'],
      options: ['--bail', '--timeout=5000'],
    });
  });

  it("reads mocha's summary, coloured or not, and nothing from an output without one", () => {
    expect(totalsOf('  ✔ one\n\n  12 passing (3s)\n  2 pending\n  1 failing\n\n  1) x\n')).to.deep.equal({ passing: 12, pending: 2, failing: 1 });
    expect(totalsOf('\u001b[92m \u001b[0m\u001b[32m 7 passing\u001b[0m\u001b[90m (1s)\u001b[0m\n')).to.deep.equal({ passing: 7, pending: 0, failing: 0 });
    expect(totalsOf('Error: Cannot find module x\n')).to.equal(undefined);
  });
});
