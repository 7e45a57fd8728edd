import { expect } from 'chai';
import { createUserFixture } from '../helpers/fixtures.ts';
import { outboundApp, Receiver, type OutboundApp } from '../helpers/outbound.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';
import { waitFor } from '../helpers/server-process.ts';

describe('outbound webhooks: a per-endpoint rate_limit held across instances', function () {
  this.timeout(90_000);

  let instances: OutboundApp[];
  let receiver: Receiver;

  before(async () => {
    instances = [await outboundApp({ concurrency: 4 }), await outboundApp({ concurrency: 4 })];
  });

  beforeEach(async () => {
    receiver = await new Receiver().start();
  });

  afterEach(async () => {
    await Promise.all(instances.map((instance) => instance.worker.stop(1_000)));
    await receiver.stop();
  });

  it('two instances delivering to an endpoint of rate_limit 5 never start more than 5 requests within a second', async () => {
    const [first, second] = instances as [OutboundApp, OutboundApp];
    const user = await createUserFixture();
    const auth = { 'X-Access-Token': user.accessToken };
    const created = await first.request.post('/api/v1/webhook-endpoints').set(auth).send({ url: receiver.url, rate_limit: 5 }).expect(201);
    rememberSecret(created.body.secret);
    expect(created.body.rate_limit).to.equal(5);
    const count = 16;
    for (let i = 0; i < count; i++) await (i % 2 ? second : first).request.post(`/api/v1/webhook-endpoints/${created.body.id}/test`).set(auth).expect(202);
    await Promise.all([first.worker.start(), second.worker.start()]);
    expect(await waitFor(() => receiver.requests.length >= count, 30_000)).to.equal(true);
    // The attempts' starts (the attempt log; the receiver's arrival times add each request's own connect and send time).
    const messages = (await first.request.get(`/api/v1/webhook-endpoints/${created.body.id}/messages`).set(auth).expect(200)).body.items as { id: string }[];
    const at: number[] = [];
    for (const message of messages) {
      const attempts = (await first.request.get(`/api/v1/webhook-endpoints/${created.body.id}/messages/${message.id}/attempts`).set(auth).expect(200)).body.items;
      at.push(...attempts.map((a: { started_at: string }) => Date.parse(a.started_at)));
    }
    at.sort((a, b) => a - b);
    expect(at).to.have.length(count);
    // Slots are 200 ms apart on the database's clock; an attempt starts at its slot plus its own lag
    // (the reservation's round trip and this process's event loop, shared by both instances: a few ms,
    // 15–80 ms beside two CPU-bound processes, 221 ms once in a CI run whose shards took 38 % longer
    // than usual). So over the whole run the rate holds to the slot, and any 6 consecutive starts span a
    // second less that lag; without the limit all 16 start within a few tens of ms.
    expect(at.at(-1)! - at[0]!).to.be.at.least(((count - 1) * 1_000) / 5 - 150);
    for (let i = 0; i + 5 < at.length; i++) expect(at[i + 5]! - at[i]!, `attempts ${i}..${i + 5}`).to.be.at.least(700);
    expect(new Set(receiver.requests.map((r) => r.headers['webhook-id'])).size).to.equal(count);
  });

  it('PATCH sets and clears it; 0 and more than 10000 are refused', async () => {
    const [first] = instances as [OutboundApp];
    const user = await createUserFixture();
    const auth = { 'X-Access-Token': user.accessToken };
    const created = await first.request.post('/api/v1/webhook-endpoints').set(auth).send({ url: receiver.url }).expect(201);
    rememberSecret(created.body.secret);
    expect(created.body.rate_limit).to.equal(null);
    const path = `/api/v1/webhook-endpoints/${created.body.id}`;
    expect((await first.request.patch(path).set(auth).send({ rate_limit: 50 }).expect(200)).body.rate_limit).to.equal(50);
    expect((await first.request.patch(path).set(auth).send({ rate_limit: null }).expect(200)).body.rate_limit).to.equal(null);
    await first.request.patch(path).set(auth).send({ rate_limit: 0 }).expect(422);
    await first.request.patch(path).set(auth).send({ rate_limit: 10_001 }).expect(422);
  });
});
