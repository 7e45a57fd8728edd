import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import pg from 'pg';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { waitFor } from '../helpers/server-process.ts';
import { postEvents } from '../helpers/webhook.ts';

type Activity = Record<string, unknown> & { type: string; conversation_id: string };

describe('conversation activity notifications (LISTEN conversation_activity)', () => {
  let client: TestApp;
  let owner: UserFixture;
  let listener: pg.Client;
  let received: Activity[];

  before(async () => {
    client = await createTestApp();
    listener = new pg.Client({ connectionString: testDatabase().url });
    await listener.connect();
    listener.on('notification', (message) => received.push(JSON.parse(message.payload!) as Activity));
    await listener.query('listen conversation_activity');
  });
  after(async () => {
    await listener.end();
  });
  beforeEach(async () => {
    owner = await createUserFixture();
    received = [];
  });

  const post = (conversationId: string, events: unknown[], user = owner) => postEvents(client, user.sessionApiKey, conversationId, events);

  const activityOf = (conversationId: string) => received.filter((activity) => activity.conversation_id === conversationId);

  it('announces deltas (identical ones too), then the stored events by sequence number, then the status change, at commit', async () => {
    const conversationId = randomUUID();
    const delta = minimalEvent('StreamingDeltaEvent', { content: ' the' });
    await post(conversationId, [delta, { ...delta }, minimalEvent('MessageEvent'), minimalEvent('PauseEvent')]).expect(200);
    expect(await waitFor(() => activityOf(conversationId).length >= 4, 5_000), JSON.stringify(received)).to.equal(true);

    const [first, second, events, status] = activityOf(conversationId);
    expect(first).to.deep.include({ type: 'delta', n: 0 });
    expect(second).to.deep.include({ type: 'delta', n: 1 });
    expect(first!.event).to.deep.equal(delta);
    expect(second!.event).to.deep.equal(delta);
    expect(events).to.deep.equal({ type: 'events', conversation_id: conversationId, first_seq: 1, last_seq: 2 });
    expect(status).to.deep.equal({ type: 'status', conversation_id: conversationId, execution_status: 'paused', last_seq: 2 });
  });

  it('announces nothing for a redelivered batch, and no status when it does not change', async () => {
    const conversationId = randomUUID();
    const batch = [minimalEvent('MessageEvent')];
    await post(conversationId, batch).expect(200);
    expect(await waitFor(() => activityOf(conversationId).length >= 1, 5_000)).to.equal(true);
    received = [];
    await post(conversationId, batch).expect(200);
    await post(conversationId, [minimalEvent('InterruptEvent')]).expect(200);
    await post(conversationId, [minimalEvent('PauseEvent')]).expect(200); // paused already
    expect(await waitFor(() => activityOf(conversationId).length >= 3, 5_000)).to.equal(true);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(activityOf(conversationId).map((activity) => [activity.type, activity.last_seq])).to.deep.equal([
      ['events', 2],
      ['status', 2],
      ['events', 3],
    ]);
  });

  it("publishes nothing into another user's conversation", async () => {
    const conversationId = randomUUID();
    await post(conversationId, [minimalEvent('MessageEvent')]).expect(200);
    expect(await waitFor(() => activityOf(conversationId).length >= 1, 5_000)).to.equal(true);
    received = [];
    const intruder = await createUserFixture();
    await post(conversationId, [minimalEvent('StreamingDeltaEvent'), minimalEvent('PauseEvent')], intruder).expect(403);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(activityOf(conversationId)).to.deep.equal([]);
  });

  it('drops a delta too large for a notification and still stores the rest of the batch', async () => {
    const conversationId = randomUUID();
    const huge = minimalEvent('StreamingDeltaEvent', { content: 'x'.repeat(10_000) });
    const small = minimalEvent('StreamingDeltaEvent', { content: 'y' });
    await post(conversationId, [huge, small, minimalEvent('MessageEvent')]).expect(200);
    expect(await waitFor(() => activityOf(conversationId).length >= 2, 5_000)).to.equal(true);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const activity = activityOf(conversationId);
    expect(activity.map((a) => a.type)).to.deep.equal(['delta', 'events']);
    expect(activity[0]!.event).to.deep.equal(small);
  });
});
