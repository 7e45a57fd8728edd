import { performance } from 'node:perf_hooks';
import { expect } from 'chai';
import {
  BUSY_UNITS,
  IDLE_MS,
  IngestPressure,
  LOOP_FREE,
  LOOP_SATURATED,
  MAX_REST_MS,
  OutboundGate,
  PROBE_MS,
  PROBE_SETTLE_MS,
  READINGS,
  REST_FACTOR,
  REST_SLICE_MS,
  WAITING_FREE,
  WAITING_SATURATED,
} from '../../src/outbound/ingest-pressure.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Keeps the event loop busy for `ms`. */
const spin = (ms: number) => {
  const until = performance.now() + ms;
  while (performance.now() < until);
};

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

/** A busy webhook: a batch goes into the ingest every 5 ms and leaves it `waitedMs` later (200 a second × `waitedMs` / 1000 in it at once). */
async function pressed(waitedMs: number, busyBatchesPerSecond = 1): Promise<{ pressure: IngestPressure; stop: () => void }> {
  const pressure = new IngestPressure(busyBatchesPerSecond);
  const timer = setInterval(() => {
    pressure.entered();
    setTimeout(() => pressure.left(), waitedMs);
  }, 5);
  await sleep(1_050);
  return { pressure, stop: () => clearInterval(timer) };
}

describe('delivery yields to ingestion (IngestPressure, OutboundGate)', () => {
  it('counts batches accepted a second over the last full second, not refused ones, and drops to zero after a quiet second', async function () {
    this.timeout(5_000);
    const pressure = new IngestPressure(50);
    for (let i = 0; i < 120; i++) {
      pressure.entered();
      pressure.left();
    }
    for (let i = 0; i < 500; i++) {
      pressure.entered();
      pressure.left(false);
    }
    pressure.entered(); // held in the ingest: the webhook has not paused
    expect(pressure.busy()).to.equal(false); // the first second is not over
    await sleep(1_050);
    expect(pressure.rate()).to.be.within(60, 120); // 120 batches over the second or so that passed
    expect(pressure.busy()).to.equal(true);
    pressure.left(false);
    await sleep(1_050);
    expect(pressure.busy()).to.equal(false); // no batch in the last second
  });

  it(`counts a webhook that has paused (nothing in the ingest, no batch for IDLE_MS) as not busy at once, not a second later`, async function () {
    this.timeout(5_000);
    const { pressure, stop } = await pressed(60);
    expect(pressure.restFactor()).to.be.greaterThan(0); // saturated; its window just closed: the next closes a second later
    pressure.entered();
    stop();
    await sleep(IDLE_MS + 150);
    expect(pressure.busy(), 'one batch is still in the ingest').to.equal(true);
    pressure.left();
    await sleep(IDLE_MS + 100);
    // Over this second's window it is busy still (13 batches or so where 1 a second is), but it has paused.
    expect(pressure.busy()).to.equal(false);
    expect(pressure.restFactor()).to.equal(0);
    const ran = await runUnits(new OutboundGate(pressure), 4, 20);
    expect(Math.max(...ran.map((unit) => unit.started))).to.be.below(20); // all at once
  });

  it('never yields with a threshold of 0 (OUTBOUND_WEBHOOK_YIELD_ABOVE=0)', async () => {
    const pressure = new IngestPressure(0);
    for (let i = 0; i < 10_000; i++) {
      pressure.entered();
      pressure.left();
    }
    expect(pressure.busy()).to.equal(false);
  });

  it('runs units at once while ingestion is quiet', async () => {
    const ran = await runUnits(new OutboundGate(new IngestPressure(50)), 4, 30);
    expect(Math.max(...ran.map((unit) => unit.started))).to.be.below(15);
  });

  it('counts the batches in the ingest at once on average, refused ones too', async function () {
    this.timeout(5_000);
    const { pressure, stop } = await pressed(50);
    try {
      // Batches a second × 50 ms each in the ingest (about 200 a second, 10 at once, on a quiet machine;
      // a loaded one fires the timers less often, and a little late).
      const waiting = pressure.waiting();
      expect(waiting).to.be.within(pressure.rate() * 0.05 * 0.9, pressure.rate() * 0.05 * 1.3);
      expect(waiting).to.be.above(1);
      const share = Math.min(1, Math.max(0, (waiting - WAITING_FREE) / (WAITING_SATURATED - WAITING_FREE)));
      expect(pressure.restFactor()).to.be.closeTo(REST_FACTOR * share, 0.01);
    } finally {
      stop();
    }
    const refused = new IngestPressure(1);
    refused.entered();
    await sleep(1_050);
    refused.left(false);
    expect(refused.waiting()).to.be.above(0.9); // one batch in the ingest the whole second
  });

  it('rests the longest when the event loop has no time left, however few batches wait (batches of one event)', async function () {
    this.timeout(5_000);
    const pressure = new IngestPressure(1);
    // A batch every 10 ms, 1 ms in the ingest, and nearly all of the 10 ms busy in the loop.
    const timer = setInterval(() => {
      pressure.entered();
      setTimeout(() => pressure.left(), 1);
      spin(9.5);
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

  it("counts the median of the last READINGS seconds' figures: one second's burst does not make the work rest", async function () {
    this.timeout(12_000);
    expect(READINGS).to.equal(3);
    const pressure = new IngestPressure(50);
    // Quiet seconds leave the ingest at once (a 1 ms timer fires 20 ms late on a loaded machine: 4 waiting),
    // and the batches of a saturated second leave as the next quiet one starts (not during it).
    let waitedMs = 0;
    const inIngest = new Set<NodeJS.Timeout>();
    const load = () => {
      pressure.entered();
      if (waitedMs === 0) return pressure.left();
      const leave = setTimeout(() => {
        inIngest.delete(leave);
        pressure.left();
      }, waitedMs);
      inIngest.add(leave);
    };
    let timer = setInterval(load, 5);
    try {
      const second = async (ms: number) => {
        waitedMs = ms;
        if (ms === 0) {
          for (const leave of inIngest) {
            clearTimeout(leave);
            pressure.left();
          }
          inIngest.clear();
        }
        await sleep(1_050);
        return pressure.restFactor();
      };
      expect(await second(0)).to.equal(0);
      // A second with 40 batches in the ingest at once, between quiet ones: the median is a quiet one.
      expect(await second(200)).to.be.above(0); // the median of two readings, one of them saturated
      expect(await second(0)).to.equal(0);
      // Two such seconds of three: the work rests the longest.
      await second(200);
      expect(await second(200)).to.equal(REST_FACTOR);
      // A second not busy, with a unit in flight throughout (as a drain's are), so nothing is read: what
      // was read before is of another load, and the next reading counts alone.
      clearInterval(timer);
      await pressure.enter();
      await sleep(1_050);
      expect(pressure.busy()).to.equal(false); // only the last batches left the ingest
      pressure.leave();
      timer = setInterval(load, 5);
      expect(await second(0)).to.equal(0);
    } finally {
      clearInterval(timer);
    }
  });

  it("reads the webhook's figures without background work: units that keep the loop busy do not count", async function () {
    this.timeout(5_000);
    const { pressure, stop } = await pressed(1);
    const gate = new OutboundGate(pressure);
    let running = true;
    // Units that spin the loop 40 ms, then leave it 15 ms to itself: busy most of the time, nearly all of it theirs.
    const units = (async () => {
      while (running) {
        await gate.run(async () => {
          await sleep(1);
          spin(40);
        });
        await sleep(15);
      }
    })();
    try {
      const from = performance.eventLoopUtilization();
      await sleep(2_100);
      const whole = performance.eventLoopUtilization(from).utilization;
      expect(whole).to.be.above(0.65);
      expect(pressure.loopBusy()).to.be.below(Math.min(LOOP_FREE, whole - 0.3));
      expect(pressure.restFactor()).to.equal(0);
    } finally {
      running = false;
      stop();
      await units;
    }
  });

  it('holds new units for a probe when units in flight leave no quiet moment, and reads the figures over it', async function () {
    this.timeout(8_000);
    const { pressure, stop } = await pressed(1);
    const gate = new OutboundGate(pressure);
    let running = true;
    const holds: number[] = [];
    // Two loops of units that overlap, each spinning the loop: never a moment without one in flight.
    const loop = async () => {
      while (running) {
        const asked = performance.now();
        await gate.run(async () => {
          holds.push(performance.now() - asked);
          spin(5);
          await sleep(10);
        });
      }
    };
    const loops = [loop(), loop()];
    try {
      await sleep(3_100);
      // A probe a second: a unit waited while the units in flight finished and the loop was read.
      expect(holds.filter((ms) => ms >= PROBE_MS * 0.9)).to.have.length.within(2, 6);
      expect(Math.max(...holds)).to.be.below(PROBE_SETTLE_MS + PROBE_MS + 250); // timers run late on a loaded machine
      // What the probe read is the webhook's loop alone, not the units' spinning (about two thirds of the time).
      expect(pressure.loopBusy()).to.be.below(0.2);
    } finally {
      running = false;
      stop();
      await Promise.all(loops);
    }
  });

  it(`runs ${BUSY_UNITS} units at a time, without rest, while the webhook is busy but has room`, async function () {
    this.timeout(5_000);
    const { pressure, stop } = await pressed(1);
    try {
      expect(pressure.busy()).to.equal(true);
      expect(pressure.restFactor()).to.equal(0);
      const ran = await runUnits(new OutboundGate(pressure), 2 * BUSY_UNITS, 30);
      const starts = ran.map((unit) => unit.started);
      expect(Math.max(...starts.slice(0, BUSY_UNITS))).to.be.below(15);
      expect(Math.min(...starts.slice(BUSY_UNITS))).to.be.within(25, 80);
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

  it('gives the next turn to a unit that goes first (making messages), ahead of those already waiting, but not two such turns in a row while others wait', async function () {
    this.timeout(5_000);
    const { pressure, stop } = await pressed(100);
    try {
      const gate = new OutboundGate(pressure);
      const order: string[] = [];
      const unit = (name: string, first = false) => gate.run(async () => void order.push(name), first);
      await Promise.all([unit('a'), unit('b'), unit('c'), unit('make 1', true), unit('make 2', true), unit('make 3', true)]);
      expect(order).to.deep.equal(['a', 'make 1', 'b', 'make 2', 'c', 'make 3']);
    } finally {
      stop();
    }
  });

  it('ends a rest once the webhook has room again, asking every REST_SLICE_MS', async function () {
    this.timeout(8_000);
    // 40 in the ingest at once; busy from 60 batches a second (a loaded machine fires the timer less often).
    const { pressure, stop } = await pressed(200, 60);
    try {
      expect(pressure.restFactor()).to.equal(REST_FACTOR);
      // The load stops as the first unit starts: the next window (a second after the last) is not busy.
      stop();
      const ran = await runUnits(new OutboundGate(pressure), 2, 300);
      const rest = ran[1]!.started - ran[0]!.started - ran[0]!.took;
      expect(rest).to.be.below(MAX_REST_MS - REST_SLICE_MS);
      expect(rest).to.be.above(0);
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
