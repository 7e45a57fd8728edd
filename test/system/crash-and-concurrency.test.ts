import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { minimalEvent } from '../fixtures/events.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { describeRun, killAllProcesses, startServerProcess, type ServerProcess } from '../helpers/server-process.ts';
import { webhookPath } from '../helpers/webhook.ts';

/**
 * Real server processes on the test database: killed with SIGKILL in the middle of a stream of
 * webhook batches, and two of them ingesting into the same conversations at once.
 */
type Event = Record<string, unknown>;

interface Delivery {
  conversationId: string;
  batch: Event[];
  status: number; // -1: no response (connection reset by the kill)
}

describe('crash and concurrency (server processes on one database)', function () {
  this.timeout(120_000);

  let user: UserFixture;

  beforeEach(async () => {
    user = await createUserFixture();
  });

  afterEach(async () => {
    await killAllProcesses();
  });

  const start = () =>
    startServerProcess({ ...process.env, DATABASE_URL: testDatabase().url, LOG_LEVEL: 'info', CREDENTIAL_CACHE_TTL_MS: '0' });

  async function deliver(server: ServerProcess, conversationId: string, batch: Event[]): Promise<number> {
    try {
      const response = await fetch(`${server.baseUrl}${webhookPath(conversationId)}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Session-API-Key': user.sessionApiKey },
        body: JSON.stringify(batch),
        signal: AbortSignal.timeout(30_000),
      });
      await response.arrayBuffer();
      return response.status;
    } catch {
      return -1;
    }
  }

  async function stored(conversationId: string): Promise<{ id: string; seq: number }[]> {
    return (await testDatabase()
      .orm.em.getConnection()
      .execute('select event_id as id, seq from conversation_events where conversation_id = ? order by seq', [conversationId])) as {
      id: string;
      seq: number;
    }[];
  }

  /** No duplicate event, every sent event present, sequence numbers 1..n without gaps or repeats. */
  async function expectExactlyOnce(conversationId: string, sentIds: Set<string>) {
    const rows = await stored(conversationId);
    const ids = rows.map((row) => row.id);
    expect(ids.length, 'no duplicate events').to.equal(new Set(ids).size);
    expect(new Set(ids), 'every sent event stored, nothing else').to.deep.equal(sentIds);
    expect(rows.map((row) => Number(row.seq)), 'seq 1..n without gaps').to.deep.equal(rows.map((_, i) => i + 1));
  }

  it('SIGKILL during a steady stream of batches: every acknowledged batch is stored in full, none half stored, retrying stores each event once', async () => {
    const first = await start();
    const deliveries: Delivery[] = [];
    let running = true;
    const conversations = Array.from({ length: 4 }, () => randomUUID());
    const loops = conversations.map(async (conversationId) => {
      while (running) {
        const batch = Array.from({ length: 20 }, () => minimalEvent('MessageEvent'));
        const delivery: Delivery = { conversationId, batch, status: 0 };
        deliveries.push(delivery);
        delivery.status = await deliver(first, conversationId, batch);
        if (delivery.status !== 200) return; // the server is gone
      }
    });
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    first.child.kill('SIGKILL');
    await first.exited;
    running = false;
    await Promise.all(loops);

    const acknowledged = deliveries.filter((d) => d.status === 200);
    const lost = deliveries.filter((d) => d.status !== 200);
    expect(acknowledged.length, 'batches acknowledged before the kill').to.be.greaterThan(10);
    expect(lost.length, 'batches in flight at the kill').to.be.greaterThan(0);

    const restartedAt = Date.now();
    const second = await start();
    const restartMs = Date.now() - restartedAt;
    let halfStored = 0;
    let inFlightCommitted = 0;
    for (const conversationId of conversations) {
      const ids = new Set((await stored(conversationId)).map((row) => row.id));
      for (const d of deliveries.filter((x) => x.conversationId === conversationId)) {
        const present = d.batch.filter((e) => ids.has(e.id as string)).length;
        if (d.status === 200) expect(present, 'acknowledged batch stored in full').to.equal(d.batch.length);
        else if (present === d.batch.length) inFlightCommitted++;
        else if (present !== 0) halfStored++;
      }
    }
    expect(halfStored, 'batches half stored').to.equal(0);

    // The agent-server retries every batch it got no 200 for; each event ends up stored once.
    for (const d of lost) expect(await deliver(second, d.conversationId, d.batch), describeRun(second)).to.equal(200);
    for (const d of acknowledged.slice(0, 5)) expect(await deliver(second, d.conversationId, d.batch)).to.equal(200); // redelivery
    for (const conversationId of conversations) {
      const sent = new Set(deliveries.filter((d) => d.conversationId === conversationId).flatMap((d) => d.batch.map((e) => e.id as string)));
      await expectExactlyOnce(conversationId, sent);
    }
    console.log(
      `      SIGKILL after ${acknowledged.length} acknowledged batches, ${lost.length} in flight ` +
        `(${inFlightCommitted} of them had committed); restart until /readyz 200: ${restartMs} ms`,
    );
  });

  it('two server processes ingesting into the same conversations (with overlapping redeliveries): no duplicate, no loss, seq without gaps', async () => {
    const [a, b] = await Promise.all([start(), start()]);
    const conversations = Array.from({ length: 3 }, () => randomUUID());
    const sent = new Map(conversations.map((id) => [id, new Set<string>()]));
    const servers = [a, b];
    let conflicts = 0;
    const clients = Array.from({ length: 8 }, async (_, client) => {
      for (let round = 0; round < 15; round++) {
        const conversationId = conversations[(client + round) % conversations.length]!;
        const batch = Array.from({ length: 10 }, () => minimalEvent('MessageEvent'));
        for (const e of batch) sent.get(conversationId)!.add(e.id as string);
        // The same batch to both servers at once (a retry racing the original), half of the time.
        const targets = round % 2 === 0 ? servers : [servers[(client + round) % 2]!];
        const statuses = await Promise.all(targets.map((server) => deliver(server, conversationId, batch)));
        for (const status of statuses) {
          if (status !== 200) conflicts++;
          expect(status, `${describeRun(a)}\n${describeRun(b)}`).to.equal(200);
        }
      }
    });
    await Promise.all(clients);
    expect(conflicts).to.equal(0);
    let total = 0;
    for (const conversationId of conversations) {
      await expectExactlyOnce(conversationId, sent.get(conversationId)!);
      total += sent.get(conversationId)!.size;
    }
    console.log(`      two servers, 8 clients, 3 conversations: ${total} events stored exactly once, seq gapless`);
  });
});
