import { expect } from 'chai';
import { IngestPressure, MAX_REST_MS, OutboundGate, REST_FACTOR } from '../src/outbound/ingest-pressure.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs `units` units of `ms` each through the gate at once; returns when each started, relative to the first. */
async function startTimes(gate: OutboundGate, units: number, ms: number): Promise<number[]> {
  const started: number[] = [];
  const origin = performance.now();
  await Promise.all(
    Array.from({ length: units }, () =>
      gate.run(async () => {
        started.push(performance.now() - origin);
        await sleep(ms);
      }),
    ),
  );
  return started;
}

describe('delivery yields to ingestion (IngestPressure, OutboundGate)', () => {
  it('counts batches a second over the last full second, and drops to zero after a quiet second', async function () {
    this.timeout(5_000);
    const pressure = new IngestPressure(50);
    for (let i = 0; i < 120; i++) pressure.note();
    expect(pressure.busy()).to.equal(false); // the first second is not over
    await sleep(1_050);
    expect(pressure.rate()).to.be.within(60, 120); // 120 batches over the second or so that passed
    expect(pressure.busy()).to.equal(true);
    await sleep(1_050);
    expect(pressure.busy()).to.equal(false); // no batch in the last second
  });

  it('never yields with a threshold of 0 (OUTBOUND_WEBHOOK_YIELD_ABOVE=0)', async () => {
    const pressure = new IngestPressure(0);
    for (let i = 0; i < 10_000; i++) pressure.note();
    expect(pressure.busy()).to.equal(false);
  });

  it('runs units at once while ingestion is quiet', async () => {
    const started = await startTimes(new OutboundGate(new IngestPressure(50)), 4, 30);
    expect(Math.max(...started)).to.be.below(15);
  });

  it('runs units one at a time, each followed by a rest REST_FACTOR times as long, while ingestion is busy', async function () {
    this.timeout(5_000);
    const pressure = new IngestPressure(1);
    for (let i = 0; i < 10; i++) pressure.note();
    await sleep(1_010);
    expect(pressure.busy()).to.equal(true);
    const busy = setInterval(() => pressure.note(), 5); // ingestion goes on meanwhile
    try {
      const started = await startTimes(new OutboundGate(pressure), 3, 20);
      // 20 ms of work, then a rest of REST_FACTOR × 20 ms before the next unit.
      const gap = 20 * (1 + REST_FACTOR);
      expect(started[1]! - started[0]!).to.be.within(gap - 10, gap + 400);
      expect(started[2]! - started[1]!).to.be.within(gap - 10, gap + 400);
    } finally {
      clearInterval(busy);
    }
  });

  it('rests at most MAX_REST_MS after a long unit', async function () {
    this.timeout(6_000);
    const pressure = new IngestPressure(1);
    for (let i = 0; i < 10; i++) pressure.note();
    await sleep(1_010);
    const busy = setInterval(() => pressure.note(), 5); // ingestion goes on meanwhile
    try {
      // 300 ms of work would earn a longer rest than MAX_REST_MS.
      expect(300 * REST_FACTOR).to.be.above(MAX_REST_MS);
      const started = await startTimes(new OutboundGate(pressure), 2, 300);
      expect(started[1]! - started[0]!).to.be.within(300 + MAX_REST_MS - 50, 300 + MAX_REST_MS + 400);
    } finally {
      clearInterval(busy);
    }
  });
});
