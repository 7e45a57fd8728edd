import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { createUserFixture } from '../helpers/fixtures.ts';
import { eventsMade, outboundApp, Receiver, verifyDelivery } from '../helpers/outbound.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';
import { waitFor } from '../helpers/server-process.ts';
import { postEvents } from '../helpers/webhook.ts';

const sdkEvents = JSON.parse(readFileSync(new URL('../fixtures/agent-server/events.json', import.meta.url), 'utf8')) as Record<string, unknown>[];
const sdkEvent = (kind: string) => structuredClone(sdkEvents.find((e) => e.kind === kind)!);

describe('outbound conversation.events with WEBHOOK_EVENT_COMPATIBILITY=accept-unknown', function () {
  this.timeout(60_000);

  it('marks the events the contract does not know in `unrecognized`, as the events list does', async () => {
    const app = await outboundApp({}, { webhookEventCompatibility: 'accept-unknown' });
    const user = await createUserFixture();
    const receiver = await new Receiver().start();
    try {
      const created = await app.request.post('/api/v1/webhook-endpoints').set('X-Access-Token', user.accessToken).send({ url: receiver.url, event_types: ['conversation.events'] }).expect(201);
      rememberSecret(created.body.secret);
      const known = { ...sdkEvent('MessageEvent'), id: randomUUID() };
      const future = { kind: 'ConversationForkedEvent', id: randomUUID(), source: 'agent', forked_into: randomUUID() };
      const extended = { ...sdkEvent('AgentErrorEvent'), id: randomUUID(), retry_after_seconds: 30 };
      const conversationId = randomUUID();
      await app.worker.start();
      await postEvents(app, user.sessionApiKey, conversationId, [known, future, extended]).expect(200);
      expect(await eventsMade(conversationId)).to.equal(true);
      await postEvents(app, user.sessionApiKey, conversationId, [{ ...sdkEvent('MessageEvent'), id: randomUUID() }]).expect(200);
      expect(await waitFor(() => receiver.requests.length >= 2, 15_000)).to.equal(true);
      const bodies = receiver.requests.map((r) => verifyDelivery(created.body.secret, r) as { data: Record<string, unknown> });
      const first = bodies.find((b) => b.data.from_seq === 1)!;
      expect((first.data.events as { id: string }[]).map((e) => e.id)).to.deep.equal([known.id, future.id, extended.id]);
      expect(first.data.unrecognized).to.deep.equal([
        { seq: 2, event_id: future.id, kind: true, properties: [] },
        { seq: 3, event_id: extended.id, kind: false, properties: ['$.retry_after_seconds'] },
      ]);
      // A range of known events only carries no marker.
      expect(bodies.find((b) => b.data.from_seq === 4)!.data).to.not.have.property('unrecognized');
    } finally {
      await app.worker.stop(1_000);
      await receiver.stop();
    }
  });
});
