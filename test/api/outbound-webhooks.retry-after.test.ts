import { expect } from 'chai';
import type { DeliveryWorker } from '../../src/outbound/delivery-worker.ts';
import { retryAfterMs } from '../../src/outbound/http-sender.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { outboundApp, Receiver, type OutboundApp } from '../helpers/outbound.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';
import { waitFor } from '../helpers/server-process.ts';

interface Attempt {
  attempt: number;
  started_at: string;
  status_code: number | null;
}

describe('outbound webhooks: a receiver\'s Retry-After', function () {
  this.timeout(60_000);

  // The schedule's second attempt would come ten minutes later: any earlier one honoured Retry-After.
  let app: OutboundApp;
  let user: UserFixture;
  let receiver: Receiver;
  const started: DeliveryWorker[] = [];

  before(async () => {
    app = await outboundApp({ retryScheduleMs: [0, 600_000], retryAfterMaxMs: 3_000 });
  });

  beforeEach(async () => {
    user = await createUserFixture();
    receiver = await new Receiver().start();
    await app.worker.start();
    started.push(app.worker);
  });

  afterEach(async () => {
    await Promise.all(started.splice(0).map((worker) => worker.stop(1_000)));
    await receiver.stop();
  });

  const auth = () => ({ 'X-Access-Token': user.accessToken });

  /** Sends a test message to a new endpoint; returns its attempts once it is no longer pending, or its state after `ms`. */
  async function testMessage(waitMs = 15_000) {
    const created = await app.request.post('/api/v1/webhook-endpoints').set(auth()).send({ url: receiver.url }).expect(201);
    rememberSecret(created.body.secret);
    const id = created.body.id as string;
    const sent = await app.request.post(`/api/v1/webhook-endpoints/${id}/test`).set(auth()).expect(202);
    const message = async () => (await app.request.get(`/api/v1/webhook-endpoints/${id}/messages`).set(auth()).expect(200)).body.items[0];
    await waitFor(async () => (await message()).state === 'succeeded', waitMs);
    const attempts = (await app.request.get(`/api/v1/webhook-endpoints/${id}/messages/${sent.body.id}/attempts`).set(auth()).expect(200)).body
      .items as Attempt[];
    return { message: await message(), attempts };
  }

  const gap = (attempts: Attempt[]) => Date.parse(attempts[1]!.started_at) - Date.parse(attempts[0]!.started_at);

  it('429 with Retry-After in seconds: the next attempt waits that long instead of the schedule', async () => {
    receiver.answers = [{ status: 429, headers: { 'retry-after': '1' } }];
    const { message, attempts } = await testMessage();
    expect(message).to.include({ state: 'succeeded', attempts: 2 });
    expect(attempts.map((a) => a.status_code)).to.deep.equal([429, 200]);
    expect(gap(attempts)).to.be.at.least(1_000);
  });

  it('503 with Retry-After as an HTTP date', async () => {
    receiver.answers = [{ status: 503, headers: { 'retry-after': new Date(Date.now() + 2_000).toUTCString() } }];
    const { message, attempts } = await testMessage();
    expect(message).to.include({ state: 'succeeded', attempts: 2 });
    expect(gap(attempts)).to.be.at.least(500);
  });

  it('a Retry-After longer than OUTBOUND_WEBHOOK_RETRY_AFTER_MAX_SECONDS waits that bound', async () => {
    receiver.answers = [{ status: 503, headers: { 'retry-after': '86400' } }];
    const { message, attempts } = await testMessage();
    expect(message).to.include({ state: 'succeeded', attempts: 2 });
    expect(gap(attempts)).to.be.at.least(3_000);
  });

  it('a Retry-After on another status (500) is not honoured: the schedule applies', async () => {
    receiver.answers = [{ status: 500, headers: { 'retry-after': '1' } }];
    const { message } = await testMessage(2_500);
    expect(message).to.include({ state: 'pending', attempts: 1, last_status_code: 500 });
    expect(Date.parse(message.next_attempt_at) - Date.now()).to.be.greaterThan(60_000);
  });
});

describe('retryAfterMs', () => {
  it('reads delta-seconds and HTTP dates; anything else is unreadable', () => {
    const now = Date.parse('2026-11-27T12:00:00Z');
    expect(retryAfterMs('120', now)).to.equal(120_000);
    expect(retryAfterMs(' 0 ', now)).to.equal(0);
    expect(retryAfterMs('Fri, 27 Nov 2026 12:00:30 GMT', now)).to.equal(30_000);
    expect(retryAfterMs('Fri, 27 Nov 2026 11:00:00 GMT', now)).to.equal(0);
    for (const bad of [undefined, '', '-5', '1.5', 'soon', '99999999999999']) expect(retryAfterMs(bad, now), String(bad)).to.equal(undefined);
  });
});
