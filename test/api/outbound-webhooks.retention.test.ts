import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/logger.ts';
import { MAX_REST_MS, REST_FACTOR, type Pressure } from '../../src/outbound/ingest-pressure.ts';
import { deleteExpiredWebhookMessages } from '../../src/retention/queries.ts';
import { WebhookMessageRetention } from '../../src/retention/webhook-messages.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { outboundApp, Receiver, type OutboundApp } from '../helpers/outbound.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';
import { waitFor } from '../helpers/server-process.ts';

const sql = (text: string, values: unknown[] = []) => testDatabase().orm.em.getConnection().execute(text, values);

describe('the outbound message log\'s retention (OUTBOUND_WEBHOOK_MESSAGE_RETENTION_DAYS)', function () {
  this.timeout(60_000);

  let app: OutboundApp;
  let user: UserFixture;
  let receiver: Receiver;
  let endpointId: string;

  before(async () => {
    app = await outboundApp({ retryScheduleMs: [0] });
  });

  beforeEach(async () => {
    user = await createUserFixture();
    receiver = await new Receiver().start();
    await app.worker.start();
    const created = await app.request.post('/api/v1/webhook-endpoints').set(auth()).send({ url: receiver.url, event_types: ['webhook.test'] }).expect(201);
    rememberSecret(created.body.secret);
    endpointId = created.body.id;
  });

  afterEach(async () => {
    await app.worker.stop(1_000);
    await receiver.stop();
  });

  const auth = () => ({ 'X-Access-Token': user.accessToken });
  const log = async () =>
    ((await app.request.get(`/api/v1/webhook-endpoints/${endpointId}/messages`).set(auth()).expect(200)).body.items as { id: string; state: string }[]);

  /** Sends a test message (answered `status`) and waits until it is no longer pending; returns its id. */
  async function sendTest(status: number): Promise<string> {
    receiver.answers = [status];
    const sent = await app.request.post(`/api/v1/webhook-endpoints/${endpointId}/test`).set(auth()).expect(202);
    expect(await waitFor(async () => (await log()).find((m) => m.id === sent.body.id)?.state !== 'pending', 15_000)).to.equal(true);
    return sent.body.id as string;
  }

  /** Stores the messages `days` ago, and their attempts too unless `attemptsToo` is false. */
  async function age(ids: string[], days: number, attemptsToo = true): Promise<void> {
    await sql(`update webhook_messages set created_at = now() - make_interval(days => ?) where id in (?)`, [days, ids]);
    await sql(`update webhook_deliveries set created_at = now() - make_interval(days => ?) where message_id in (?)`, [days, ids]);
    if (attemptsToo) await sql(`update webhook_attempts set started_at = now() - make_interval(days => ?) where message_id in (?)`, [days, ids]);
  }

  const rows = async (table: string, ids: string[]) =>
    ((await sql(`select count(*)::int as n from ${table} where message_id in (?)`, [ids])) as [{ n: number }])[0].n;

  it('deletes the messages done with for the period, with their deliveries and attempts; keeps what is owed, recently attempted or recent', async () => {
    const succeeded = await sendTest(200);
    const failed = await sendTest(500);
    const owed = await sendTest(200);
    const retriedLately = await sendTest(200);
    const recent = await sendTest(200);
    expect((await log()).find((m) => m.id === failed)!.state).to.equal('failed');
    await app.worker.stop(1_000);

    await age([succeeded, failed, owed], 31);
    await age([retriedLately], 31, false);
    await sql(`update webhook_deliveries set state = 'pending' where message_id = ?`, [owed]);
    // Not fanned out yet (stored while the workers were down): its deliveries do not exist yet.
    await sql(
      `insert into webhook_messages (id, owner_id, type, data, created_at) values ('msg_unfanned', ?, 'webhook.test', '{}', now() - interval '40 days')`,
      [user.orgId],
    );
    expect(await rows('webhook_attempts', [succeeded, failed])).to.equal(2);

    const sweep = () => new WebhookMessageRetention(testDatabase().orm.em, 30, createLogger('silent')).sweep();
    expect(await sweep()).to.equal(2);
    expect(await rows('webhook_deliveries', [succeeded, failed])).to.equal(0);
    expect(await rows('webhook_attempts', [succeeded, failed])).to.equal(0);
    const kept = (await sql('select id from webhook_messages order by id')) as { id: string }[];
    expect(kept.map((m) => m.id)).to.have.members([owed, retriedLately, recent, 'msg_unfanned']);
    expect((await log()).map((m) => m.id)).to.have.members([owed, retriedLately, recent]);
    await app.request.get(`/api/v1/webhook-endpoints/${endpointId}/messages/${succeeded}/attempts`).set(auth()).expect(404);
    await app.request.post(`/api/v1/webhook-endpoints/${endpointId}/messages/${failed}/retry`).set(auth()).expect(404);
    expect(await sweep()).to.equal(0);

    // Done with at last: the owed one once it is no longer pending.
    await sql(`update webhook_deliveries set state = 'succeeded' where message_id = ?`, [owed]);
    expect(await sweep()).to.equal(1);
    expect((await log()).map((m) => m.id)).to.have.members([retriedLately, recent]);
  });

  it('walks past the messages that stay: each statement goes on after the last one it looked at', async () => {
    const stays = await sendTest(200);
    const goes = await sendTest(200);
    await app.worker.stop(1_000);
    await age([stays], 32);
    await age([goes], 31);
    await sql(`update webhook_deliveries set state = 'pending' where message_id = ?`, [stays]);

    const em = testDatabase().orm.em;
    const first = await deleteExpiredWebhookMessages(em, 30, 1, undefined);
    expect(first).to.deep.include({ deleted: 0, examined: 1 });
    expect(first.cursor!.id).to.equal(stays);
    const second = await deleteExpiredWebhookMessages(em, 30, 1, first.cursor);
    expect(second).to.deep.include({ deleted: 1, examined: 1 });
    expect(second.cursor!.id).to.equal(goes);
    const third = await deleteExpiredWebhookMessages(em, 30, 1, second.cursor);
    expect(third).to.deep.equal({ deleted: 0, examined: 0, cursor: second.cursor });
    expect((await log()).map((m) => m.id)).to.deep.equal([stays]);
  });

  it('yields to a busy webhook: each statement is counted as background work and followed by a rest 19 times as long', async () => {
    await app.worker.stop(1_000);
    await sql(
      `insert into webhook_messages (id, owner_id, type, data, fanned_out, created_at)
       select 'msg_old' || i, ?, 'webhook.test', '{}', true, now() - interval '31 days' - make_interval(secs => i) from generate_series(1, 150) as i`,
      [user.orgId],
    );
    const statements: { entered: number; left?: number }[] = [];
    const busyWebhook: Pressure = {
      busy: () => true,
      restFactor: () => REST_FACTOR,
      enter: async () => void statements.push({ entered: performance.now() }),
      leave: () => void (statements.at(-1)!.left = performance.now()),
    };
    expect(await new WebhookMessageRetention(testDatabase().orm.em, 30, createLogger('silent'), busyWebhook).sweep()).to.equal(150);
    expect(statements).to.have.length(2); // 100, then the last 50
    const [first, second] = statements as [{ entered: number; left: number }, { entered: number; left: number }];
    const took = first.left - first.entered;
    expect(second.entered - first.left).to.be.at.least(Math.min(MAX_REST_MS, took * REST_FACTOR) - 2);
  });

  it('keeps 30 days by default, and never fewer than the 14 days recovery and bulk retries reach back', () => {
    const env = { DATA_DIR: '.data/unused' };
    expect(loadConfig(env).outboundWebhooks.messageRetentionDays).to.equal(30);
    expect(loadConfig({ ...env, OUTBOUND_WEBHOOK_MESSAGE_RETENTION_DAYS: '15' }).outboundWebhooks.messageRetentionDays).to.equal(15);
    expect(() => loadConfig({ ...env, OUTBOUND_WEBHOOK_MESSAGE_RETENTION_DAYS: '14' })).to.throw(ConfigError, /OUTBOUND_WEBHOOK_MESSAGE_RETENTION_DAYS/);
  });
});
