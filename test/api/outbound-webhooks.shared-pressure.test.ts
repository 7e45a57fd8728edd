import { expect } from 'chai';
import { createLogger } from '../../src/logger.ts';
import { BUSY_UNITS, OutboundGate, type Pressure } from '../../src/outbound/ingest-pressure.ts';
import { SharedIngestPressure } from '../../src/outbound/shared-pressure.ts';
import { testDatabase } from '../helpers/hooks.ts';

/** A webhook's own pressure, set by the test. */
class Stub implements Pressure {
  factor: number | null = null;
  busy(): boolean {
    return this.factor !== null;
  }
  restFactor(): number {
    return this.factor ?? 0;
  }
  async enter(): Promise<void> {}
  leave(): void {}
}

describe('outbound webhooks: delivery on one instance yields to the webhook of another (SharedIngestPressure)', () => {
  const em = () => testDatabase().orm.em;
  const log = createLogger('silent');
  /** A webhook's instance (`front`, its pressure set through `webhook`) and an instance that delivers. */
  const instances = () => {
    const webhook = new Stub();
    return { webhook, front: new SharedIngestPressure(em(), webhook, log), delivering: new SharedIngestPressure(em(), new Stub(), log) };
  };
  const reports = async () =>
    (await em().getConnection().execute<{ rest_factor: number }[]>('select rest_factor from ingest_pressure order by rest_factor')).map((r) => r.rest_factor);

  it("takes the busiest other instance's rest factor, and its own webhook's when higher", async () => {
    const [webhookA, webhookB, own] = [new Stub(), new Stub(), new Stub()];
    const a = new SharedIngestPressure(em(), webhookA, log);
    const b = new SharedIngestPressure(em(), webhookB, log);
    const delivering = new SharedIngestPressure(em(), own, log);
    webhookA.factor = 7;
    webhookB.factor = 12.5;
    await a.exchange(false);
    await b.exchange(false);
    expect(await reports()).to.deep.equal([7, 12.5]);
    expect(delivering.busy()).to.equal(false); // nothing read yet
    await delivering.exchange(true);
    expect(delivering.busy()).to.equal(true);
    expect(delivering.restFactor()).to.equal(12.5);
    own.factor = 19;
    expect(delivering.restFactor()).to.equal(19);
    // Its own report is not another's.
    await delivering.exchange(true);
    own.factor = null;
    expect(delivering.restFactor()).to.equal(12.5);
  });

  it(`a busy webhook with room (factor 0) makes delivery elsewhere busy, ${BUSY_UNITS} units at a time without rest; a quiet one removes its report`, async () => {
    const { webhook, front, delivering } = instances();
    webhook.factor = 0;
    await front.exchange(false);
    await delivering.exchange(true);
    expect([delivering.busy(), delivering.restFactor()]).to.deep.equal([true, 0]);
    const gate = new OutboundGate(delivering);
    const started: number[] = [];
    const origin = performance.now();
    const unit = async () => {
      started.push(performance.now() - origin);
      await new Promise((resolve) => setTimeout(resolve, 30));
    };
    await Promise.all(Array.from({ length: BUSY_UNITS + 1 }, () => gate.run(unit)));
    expect(Math.max(...started.slice(0, BUSY_UNITS))).to.be.below(15);
    expect(started[BUSY_UNITS]).to.be.within(25, 80); // the next unit goes when one is done, without rest

    webhook.factor = null;
    await front.exchange(false);
    expect(await reports()).to.deep.equal([]);
    await delivering.exchange(true);
    expect([delivering.busy(), delivering.restFactor()]).to.deep.equal([false, 0]);
  });

  it('a report older than 3 s is no pressure (its instance died), and stop() removes its own', async () => {
    const { webhook, front, delivering } = instances();
    webhook.factor = 19;
    await front.exchange(false);
    await em().getConnection().execute("update ingest_pressure set reported_at = now() - interval '4 seconds'");
    await delivering.exchange(true);
    expect(delivering.busy()).to.equal(false);

    await front.exchange(false);
    await delivering.exchange(true);
    expect(delivering.restFactor()).to.equal(19);
    await front.stop();
    expect(await reports()).to.deep.equal([]);
  });

  it('yields to its own webhook alone while the exchange fails, and says so once', async () => {
    const lines: string[] = [];
    const logger = createLogger('info', { write: (line: string) => void lines.push(line) });
    const webhook = new Stub();
    const front = new SharedIngestPressure(em(), webhook, log);
    webhook.factor = 19;
    await front.exchange(false);
    const own = new Stub();
    const delivering = new SharedIngestPressure(em(), own, logger);
    await delivering.exchange(true);
    expect(delivering.restFactor()).to.equal(19);
    await em().getConnection().execute('alter table ingest_pressure rename to ingest_pressure_away');
    try {
      await delivering.exchange(true);
      await delivering.exchange(true);
    } finally {
      await em().getConnection().execute('alter table ingest_pressure_away rename to ingest_pressure');
    }
    expect(delivering.busy()).to.equal(false);
    own.factor = 4;
    expect(delivering.restFactor()).to.equal(4);
    expect(lines.filter((line) => line.includes('ingest pressure exchange failed'))).to.have.length(1);
    await delivering.exchange(true);
    expect(delivering.restFactor()).to.equal(19);
    expect(lines.filter((line) => line.includes('ingest pressure exchange works again'))).to.have.length(1);
  });
});
