import { expect } from 'chai';
import { IngestPressure, LOOP_SATURATED, MAX_REST_MS, OutboundGate, REST_FACTOR, WAITING_FREE, WAITING_SATURATED } from '../../src/outbound/ingest-pressure.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs `units` units of `ms` each through the gate at once; returns, in the order they ran, when each
 * started (relative to the first) and how long it took: a timer may fire a little before its `ms`, and
 * the gate's rest is a multiple of what the unit really took.
 */
async function runUnits(gate: OutboundGate, units: number, ms: number): Promise<{ started: number; took: number }[]> {
  const ran: { started: number; took: number }[] = [];
  const origin = performance.now();
  await Promise.all(
    Array.from({ length: units }, () =>
      gate.run(async () => {
        const unit = { started: performance.now() - origin, took: 0 };
        ran.push(unit);
        await sleep(ms);
        unit.took = performance.now() - origin - unit.started;
      }),
    ),
  );
  return ran;
}

/** A busy webhook: batches every 5 ms, each `waitedMs` in the ingest (200 a second × `waitedMs` / 1000 waiting at once). */
async function pressed(waitedMs: number): Promise<{ pressure: IngestPressure; stop: () => void }> {
  const pressure = new IngestPressure(1);
  const timer = setInterval(() => pressure.note(waitedMs), 5);
  await sleep(1_050);
  return { pressure, stop: () => clearInterval(timer) };
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
    const ran = await runUnits(new OutboundGate(new IngestPressure(50)), 4, 30);
    expect(Math.max(...ran.map((unit) => unit.started))).to.be.below(15);
  });

  it('counts the batches waiting at once on average: the time they spent in the ingest over the window', async function () {
    this.timeout(5_000);
    const { pressure, stop } = await pressed(50);
    try {
      // Little's law: batches a second × 50 ms each in the ingest (about 200 a second, 10 at once, on a
      // quiet machine; a loaded one fires the timer less often).
      const waiting = pressure.waiting();
      expect(waiting).to.be.closeTo(pressure.rate() * 0.05, 0.01);
      expect(waiting).to.be.above(1);
      const share = Math.min(1, Math.max(0, (waiting - WAITING_FREE) / (WAITING_SATURATED - WAITING_FREE)));
      expect(pressure.restFactor()).to.be.closeTo(REST_FACTOR * share, 0.01);
    } finally {
      stop();
    }
  });

  it('rests the longest when the event loop has no time left, however few batches wait (batches of one event)', async function () {
    this.timeout(5_000);
    const pressure = new IngestPressure(1);
    // A batch every 10 ms, 1 ms in the ingest, and nearly all of the 10 ms busy in the loop.
    const timer = setInterval(() => {
      pressure.note(1);
      const until = performance.now() + 9.5;
      while (performance.now() < until);
    }, 10);
    try {
      await sleep(1_100);
      expect(pressure.waiting()).to.be.below(WAITING_FREE);
      expect(pressure.loopBusy()).to.be.at.least(LOOP_SATURATED);
      expect(pressure.restFactor()).to.equal(REST_FACTOR);
    } finally {
      clearInterval(timer);
    }
  });

  it('runs units at once while the webhook is busy but has room (its batches do not queue up, its loop is not saturated)', async function () {
    this.timeout(5_000);
    const { pressure, stop } = await pressed(1);
    try {
      expect(pressure.busy()).to.equal(true);
      expect(pressure.restFactor()).to.equal(0);
      const ran = await runUnits(new OutboundGate(pressure), 4, 30);
      expect(Math.max(...ran.map((unit) => unit.started))).to.be.below(15);
    } finally {
      stop();
    }
  });

  it('runs units one at a time, each followed by a rest REST_FACTOR times as long, while the webhook is saturated', async function () {
    this.timeout(5_000);
    const { pressure, stop } = await pressed(100); // 20 waiting at once
    try {
      expect(pressure.restFactor()).to.equal(REST_FACTOR);
      const ran = await runUnits(new OutboundGate(pressure), 3, 20);
      // About 20 ms of work, then a rest of REST_FACTOR times what it took before the next unit.
      for (const [previous, next] of [[ran[0]!, ran[1]!], [ran[1]!, ran[2]!]] as const) {
        const gap = previous.took * (1 + REST_FACTOR);
        expect(next.started - previous.started).to.be.within(gap - 10, gap + 400);
      }
    } finally {
      stop();
    }
  });

  it('rests at most MAX_REST_MS after a long unit', async function () {
    this.timeout(6_000);
    const { pressure, stop } = await pressed(100);
    try {
      // 300 ms of work would earn a longer rest than MAX_REST_MS.
      expect(300 * REST_FACTOR).to.be.above(MAX_REST_MS);
      const ran = await runUnits(new OutboundGate(pressure), 2, 300);
      expect(ran[1]!.started - ran[0]!.started).to.be.within(300 + MAX_REST_MS - 50, 300 + MAX_REST_MS + 400);
    } finally {
      stop();
    }
  });
});
