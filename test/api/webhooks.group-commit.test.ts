import { randomUUID } from 'node:crypto';
import v8 from 'node:v8';
import vm from 'node:vm';
import { expect } from 'chai';
import pg from 'pg';
import { ConversationService, type Event } from '../../src/conversations/conversation-service.ts';
import { jsonArray } from '../../src/conversations/queries.ts';
import { GroupCommitter } from '../../src/conversations/group-commit.ts';
import { isDatabaseUnavailable } from '../../src/db/errors.ts';
import { ForbiddenError } from '../../src/errors.ts';
import type { Principal } from '../../src/identity/authenticator.ts';
import { createLogger } from '../../src/logger.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { postEvents } from '../helpers/webhook.ts';

interface StoredRow {
  conversation_id: string;
  seq: number;
  event_id: string;
}

async function storedRows(): Promise<StoredRow[]> {
  return testDatabase()
    .orm.em.getConnection()
    .execute<StoredRow[]>('select conversation_id, seq, event_id from conversation_events order by conversation_id, seq');
}

async function eventCounts(): Promise<Map<string, number>> {
  const rows = await testDatabase()
    .orm.em.getConnection()
    .execute<{ id: string; event_count: number }[]>('select id, event_count from conversations');
  return new Map(rows.map((row) => [row.id, row.event_count]));
}

/** A batch of `size` events with fresh ids (a status-changing one among them now and then). */
function batchOf(size: number): Record<string, unknown>[] {
  return Array.from({ length: size }, (_, i) => minimalEvent(i % 4 === 3 ? 'PauseEvent' : 'MessageEvent'));
}

/**
 * What every accepted batch must look like once stored: each of its events exactly once, in its
 * conversation, with consecutive sequence numbers in the batch's order; every conversation's
 * sequence gapless from 1 and equal to its event_count; nothing else stored.
 */
function expectStoredExactly(rows: StoredRow[], counts: Map<string, number>, accepted: { conversationId: string; ids: string[] }[]) {
  const byKey = new Map(rows.map((row) => [`${row.conversation_id}/${row.event_id}`, row]));
  expect(byKey.size, 'an event stored twice').to.equal(rows.length);
  let expectedRows = 0;
  for (const { conversationId, ids } of accepted) {
    const seqs = ids.map((id) => byKey.get(`${conversationId}/${id}`)?.seq);
    expect(seqs.every((seq) => seq !== undefined), `batch for ${conversationId} not stored`).to.equal(true);
    expect(seqs, 'a batch is stored contiguously, in its order').to.deep.equal(seqs.map((_, i) => seqs[0]! + i));
    expectedRows += ids.length;
  }
  expect(rows.length, 'something stored that was not accepted').to.equal(expectedRows);
  const perConversation = new Map<string, number[]>();
  for (const row of rows) perConversation.set(row.conversation_id, [...(perConversation.get(row.conversation_id) ?? []), row.seq]);
  for (const [conversationId, seqs] of perConversation) {
    expect(seqs).to.deep.equal(seqs.map((_, i) => i + 1));
    expect(counts.get(conversationId)).to.equal(seqs.length);
  }
}

describe('webhook group commit', () => {
  describe('over HTTP: concurrent batches, some of which must fail', () => {
    let client: TestApp;
    let owner: UserFixture;
    let stranger: UserFixture;
    before(async () => {
      // One transaction at a time and small groups: coalescing is certain and groups split.
      client = await createTestApp({ ingestGroup: { maxInFlight: 1, maxBatches: 7, maxEvents: 40 } });
    });
    beforeEach(async () => {
      owner = await createUserFixture();
      stranger = await createUserFixture();
    });

    const post = (conversationId: string, events: unknown, user: UserFixture) => postEvents(client, user.sessionApiKey, conversationId, events);

    it('answers each request for itself (200, 403, 422) and stores each accepted batch exactly once, contiguous and in order', async function () {
      this.timeout(60_000);
      const busy = randomUUID(); // many batches for one conversation
      const quiet = Array.from({ length: 12 }, () => randomUUID()); // a batch or two each
      const theirs = randomUUID(); // the stranger's: the owner's batches for it get 403
      await post(theirs, batchOf(2), stranger).expect(200);

      type Case = { conversationId: string; events: Record<string, unknown>[]; user: UserFixture; status: number };
      const cases: Case[] = [];
      for (let i = 0; i < 30; i++) cases.push({ conversationId: busy, events: batchOf(1 + (i % 6)), user: owner, status: 200 });
      for (const [i, conversationId] of quiet.entries()) {
        cases.push({ conversationId, events: batchOf(3), user: owner, status: 200 });
        if (i % 2 === 0) cases.push({ conversationId, events: batchOf(2), user: owner, status: 200 });
      }
      for (let i = 0; i < 6; i++) cases.push({ conversationId: theirs, events: batchOf(2), user: owner, status: 403 });
      for (let i = 0; i < 6; i++) {
        const invalid = [...batchOf(2), { kind: 'MessageEvent', source: 'nobody' }];
        cases.push({ conversationId: i % 2 ? busy : quiet[i]!, events: invalid, user: owner, status: 422 });
      }
      // A larger batch than a group may hold goes alone; a redelivery racing its original is stored once.
      cases.push({ conversationId: busy, events: batchOf(50), user: owner, status: 200 });
      const redelivered = batchOf(3);
      cases.push({ conversationId: quiet[0]!, events: redelivered, user: owner, status: 200 });
      cases.push({ conversationId: quiet[0]!, events: structuredClone(redelivered), user: owner, status: 200 });
      // Interleave the kinds of request.
      const order = cases.map((_, i) => i).sort((a, b) => ((a * 7919) % 97) - ((b * 7919) % 97));

      const responses = await Promise.all(order.map((i) => post(cases[i]!.conversationId, cases[i]!.events, cases[i]!.user)));
      responses.forEach((response, k) => {
        const expected = cases[order[k]!]!;
        expect(response.status, JSON.stringify(response.body)).to.equal(expected.status);
        if (expected.status === 403) expect(response.body).to.deep.equal({ detail: 'This conversation belongs to another organization' });
        if (expected.status === 422) expect(response.body.detail[0].loc.slice(0, 2)).to.deep.equal(['body', 2]);
      });

      const accepted = cases
        .filter((c) => c.status === 200 && c.events !== redelivered)
        .map((c) => ({ conversationId: c.conversationId, ids: c.events.map((e) => e.id as string) }));
      // The stranger's own first batch; their conversation got nothing from the owner.
      const rows = await storedRows();
      const strangersRows = rows.filter((row) => row.conversation_id === theirs);
      expect(strangersRows).to.have.length(2);
      expectStoredExactly(rows, await eventCounts(), [
        ...accepted,
        { conversationId: theirs, ids: strangersRows.map((row) => row.event_id) },
      ]);
    });
  });

  describe('in the service: coalescing', () => {
    const log = createLogger('silent');
    const principal = (userId: string): Principal => ({
      userId,
      email: `${userId}@example.com`,
      isSuperAdmin: false,
      credentialId: randomUUID(),
      credentialKind: 'session_api_key',
      orgId: userId,
      orgRole: 'member',
      orgSuspended: false,
    });

    it('stores concurrent batches in fewer transactions than requests, each answered with its own outcome', async () => {
      const owner = await createUserFixture();
      const stranger = await createUserFixture();
      const service = new ConversationService(testDatabase().orm.em, log, { maxInFlight: 1, maxBatches: 16, maxEvents: 1000 });
      const theirs = randomUUID();
      await service.ingest(principal(stranger.userId), theirs, batchOf(1) as Event[]);
      const conversations = [randomUUID(), randomUUID(), randomUUID()];

      const requests = Array.from({ length: 48 }, (_, i) => {
        const forbidden = i % 8 === 5;
        const conversationId = forbidden ? theirs : conversations[i % conversations.length]!;
        const events = batchOf(1 + (i % 3));
        return { conversationId, events, forbidden };
      });
      const before = { ...service.ingestion.stats };
      const outcomes = await Promise.allSettled(
        requests.map((r) => service.ingest(principal(owner.userId), r.conversationId, structuredClone(r.events) as Event[])),
      );
      const transactions = service.ingestion.stats.transactions - before.transactions;

      outcomes.forEach((outcome, i) => {
        const request = requests[i]!;
        if (request.forbidden) {
          expect(outcome.status).to.equal('rejected');
          expect((outcome as PromiseRejectedResult).reason).to.be.instanceOf(ForbiddenError);
        } else {
          expect(outcome).to.deep.equal({ status: 'fulfilled', value: { stored: request.events.length, droppedDeltas: 0 } });
        }
      });
      expect(service.ingestion.stats.batches - before.batches).to.equal(requests.length);
      expect(transactions).to.be.lessThan(requests.length / 2);
      expect(service.ingestion.stats.largestGroup).to.be.within(2, 16);
      expect(service.ingestion.stats.retriedGroups).to.equal(0);

      const accepted = requests
        .filter((r) => !r.forbidden)
        .map((r) => ({ conversationId: r.conversationId, ids: r.events.map((e) => e.id as string) }));
      const rows = await storedRows();
      const strangersRows = rows.filter((row) => row.conversation_id === theirs);
      expect(strangersRows).to.have.length(1);
      expectStoredExactly(rows, await eventCounts(), [
        ...accepted,
        { conversationId: theirs, ids: strangersRows.map((row) => row.event_id) },
      ]);
      // Batches of one conversation are stored in the order they were submitted.
      for (const conversationId of conversations) {
        const submitted = accepted.filter((a) => a.conversationId === conversationId).flatMap((a) => a.ids);
        const stored = rows.filter((row) => row.conversation_id === conversationId).map((row) => row.event_id);
        expect(stored).to.deep.equal(submitted);
      }
    });

    it('stores a group exactly as it would store its batches one after the other', async () => {
      const [owner, stranger] = [await createUserFixture(), await createUserFixture()];
      const [a, b] = [principal(owner.userId), principal(stranger.userId)];
      const [m0, m1, m2, m3, m4, m5] = Array.from({ length: 6 }, () => minimalEvent('MessageEvent', { id: randomUUID() }));
      const pause = minimalEvent('PauseEvent', { id: randomUUID() });
      /**
       * In one group: a new conversation claimed by two callers (the first batch wins, the other is
       * refused), repeated event ids within the group and across groups, a status change, and an
       * existing conversation continuing its sequence.
       */
      const scenario = (fresh: string, existing: string) => [
        { caller: b, conversationId: fresh, events: [m1] },
        { caller: a, conversationId: fresh, events: [m2] },
        { caller: b, conversationId: fresh, events: [m2, pause] },
        { caller: b, conversationId: fresh, events: [m2, m3] },
        { caller: a, conversationId: existing, events: [m4] },
        { caller: a, conversationId: existing, events: [m5, m4] },
      ];
      const run = async (grouped: boolean) => {
        const service = new ConversationService(testDatabase().orm.em, log, { maxInFlight: 1, maxBatches: 16, maxEvents: 1000 });
        const [fresh, existing] = [randomUUID(), randomUUID()];
        await service.ingest(a, existing, structuredClone([m0, m4]) as Event[]);
        const before = service.ingestion.stats.transactions;
        const ingest = (batch: ReturnType<typeof scenario>[number]) =>
          service.ingest(batch.caller, batch.conversationId, structuredClone(batch.events) as Event[]).then(
            (result) => result.stored,
            (error: unknown) => (error instanceof ForbiddenError ? 'forbidden' : error),
          );
        const outcomes: unknown[] = [];
        if (grouped) outcomes.push(...(await Promise.all(scenario(fresh, existing).map(ingest))));
        else for (const batch of scenario(fresh, existing)) outcomes.push(await ingest(batch));
        const connection = testDatabase().orm.em.getConnection();
        const stored = async (id: string) => ({
          conversation: await connection.execute('select owner_id, event_count, execution_status from conversations where id = ?', [id]),
          events: await connection.execute('select seq, event_id, kind from conversation_events where conversation_id = ? order by seq', [id]),
        });
        return {
          outcomes,
          transactions: service.ingestion.stats.transactions - before,
          fresh: await stored(fresh),
          existing: await stored(existing),
        };
      };

      const oneByOne = await run(false);
      const grouped = await run(true);
      expect(oneByOne.outcomes).to.deep.equal([1, 'forbidden', 2, 1, 0, 1]);
      expect(oneByOne.fresh.conversation).to.deep.equal([{ owner_id: stranger.userId, event_count: 4, execution_status: 'paused' }]);
      expect(grouped.transactions).to.equal(1);
      expect({ ...grouped, transactions: undefined }).to.deep.equal({ ...oneByOne, transactions: undefined });
    });
  });

  describe('payloads of a large group', () => {
    /** A MessageEvent whose text is `chars` characters long, some of them two-byte (and one astral). */
    const messageOf = (chars: number, n: number) =>
      minimalEvent('MessageEvent', {
        id: randomUUID(),
        llm_message: { role: 'agent', content: [{ type: 'text', text: `#${n} é中😀 ${'x'.repeat(chars)}` }] },
      });

    it('jsonArray writes `[` + the payloads joined by commas + `]`', () => {
      const texts = Array.from({ length: 300 }, (_, n) => JSON.stringify(messageOf(n * 17, n)));
      for (const count of [0, 1, 2, 40, 300]) {
        const some = texts.slice(0, count);
        expect(jsonArray(some.map((text) => Buffer.from(text))).toString('utf8'), `${count} texts`).to.equal(`[${some.join(',')}]`);
      }
      const long = [JSON.stringify(messageOf(200_000, 0)), texts[1]!, JSON.stringify(messageOf(70_000, 2))];
      expect(jsonArray(long.map((text) => Buffer.from(text))).toString('utf8')).to.equal(`[${long.join(',')}]`);
    });

    it('stores a group of large batches byte for byte', async () => {
      const owner = await createUserFixture();
      const service = new ConversationService(testDatabase().orm.em, createLogger('silent'), { maxInFlight: 1, maxBatches: 16, maxEvents: 1000 });
      const principal: Principal = {
        userId: owner.userId,
        email: owner.email,
        isSuperAdmin: false,
        credentialId: randomUUID(),
        credentialKind: 'session_api_key',
        orgId: owner.userId,
        orgRole: 'member',
        orgSuspended: false,
      };
      const conversations = [randomUUID(), randomUUID(), randomUUID()];
      const batches = conversations.map((_, b) => Array.from({ length: 100 }, (_, n) => messageOf(900 + n, b * 100 + n)));
      const outcomes = await Promise.all(
        batches.map((events, b) => service.ingest(principal, conversations[b]!, structuredClone(events) as Event[])),
      );
      expect(outcomes.map((o) => o.stored)).to.deep.equal([100, 100, 100]);
      expect(service.ingestion.stats.largestGroup, 'the batches went together').to.be.greaterThan(1);
      const rows = await testDatabase()
        .orm.em.getConnection()
        .execute<{ conversation_id: string; seq: number; payload: string }[]>(
          'select conversation_id, seq, payload::text as payload from conversation_events order by conversation_id, seq',
        );
      const expected = conversations
        .map((conversationId, b) => batches[b]!.map((event, n) => ({ conversation_id: conversationId, seq: n + 1, payload: JSON.stringify(event) })))
        .flat()
        .sort((x, y) => (x.conversation_id < y.conversation_id ? -1 : x.conversation_id > y.conversation_id ? 1 : x.seq - y.seq));
      expect(rows).to.deep.equal(expected);
    });
  });

  describe('a batch waiting for its commit', () => {
    let client: TestApp;
    before(async () => {
      client = await createTestApp();
    });

    it('holds no more of the JS heap than a small part of its body (the parsed body is let go of)', async function () {
      this.timeout(60_000);
      v8.setFlagsFromString('--expose-gc');
      const gc = vm.runInNewContext('gc') as () => void;
      const owner = await createUserFixture();
      const conversationId = randomUUID();
      const post = (body: string) => postEvents(client, owner.sessionApiKey, conversationId, body);
      const first = await post(JSON.stringify([minimalEvent('MessageEvent')]));
      expect(first.status, JSON.stringify(first.body)).to.equal(200);

      // Another transaction holds the conversation's row: the batches below wait for their commit.
      const blocker = new pg.Client({ connectionString: testDatabase().url });
      await blocker.connect();
      try {
        await blocker.query('begin');
        await blocker.query('select 1 from conversations where id = $1 for update', [conversationId]);
        // Each body carries one 1 MB text; the bodies are on the heap before it is measured.
        const batches = 8;
        const textChars = 1_000_000;
        const bodies = Array.from({ length: batches }, (_, n) =>
          JSON.stringify([minimalEvent('MessageEvent', {
            llm_message: { role: 'assistant', content: [{ type: 'text', text: `${n}`.padEnd(textChars, 'x') }] },
          })]),
        );
        gc();
        const before = process.memoryUsage().heapUsed;
        const answered: number[] = [];
        const pending = bodies.map((body) =>
          post(body).then((response) => {
            answered.push(response.status);
            return response.status;
          }),
        );
        // Every request read, parsed and waiting: the first in the database, on the row lock. (Asked
        // outside the blocking transaction, whose view of pg_stat_activity stays the one it first read.)
        const waiting = async () =>
          (
            await testDatabase()
              .orm.em.getConnection()
              .execute<{ n: number }[]>(
                `select count(*)::int as n from pg_stat_activity
                  where datname = current_database() and wait_event_type = 'Lock' and query like '%ingest_event_batches(%'`,
              )
          )[0]!.n;
        for (let tries = 0; (await waiting()) === 0; tries++) {
          expect(answered, 'answered before the lock was released').to.deep.equal([]);
          expect(tries, 'a batch waits for the lock').to.be.lessThan(400);
          await new Promise((resolve) => setTimeout(resolve, 25));
        }
        await new Promise((resolve) => setTimeout(resolve, 1000));
        gc();
        const held = process.memoryUsage().heapUsed - before;
        // Were the parsed events kept, each batch would hold its 1 MB text on the heap, at least.
        expect(held, `heap held by ${batches} waiting batches`).to.be.lessThan((batches * textChars) / 4);
        await blocker.query('commit');
        expect(await Promise.all(pending)).to.deep.equal(Array(batches).fill(200));
        expect(bodies).to.have.length(batches); // held to here, so that they count before and after
      } finally {
        await blocker.end();
      }
      const [stored] = await testDatabase()
        .orm.em.getConnection()
        .execute<{ count: number }[]>('select count(*)::int as count from conversation_events where conversation_id = ?', [conversationId]);
      expect(stored?.count).to.equal(1 + 8);
    });
  });

  describe('GroupCommitter', () => {
    const settle = () => new Promise((resolve) => setImmediate(resolve));

    it('takes waiting batches in arrival order, within the bounds in batches and in events', async () => {
      const groups: number[][] = [];
      const committer = new GroupCommitter<number, number>(
        async (batches) => {
          groups.push(batches);
          await settle();
          return batches.map((b) => b * 10);
        },
        { maxInFlight: 1, maxBatches: 4, maxEvents: 10 },
      );
      const sizes = [1, 1, 1, 1, 1, 5, 5, 1, 20, 1];
      const results = await Promise.all(sizes.map((size, i) => committer.submit(i, size)));
      expect(results).to.deep.equal(sizes.map((_, i) => i * 10));
      expect(groups.flat()).to.deep.equal(sizes.map((_, i) => i));
      for (const group of groups) {
        expect(group.length).to.be.within(1, 4);
        const events = group.reduce((sum, i) => sum + sizes[i]!, 0);
        if (group.length > 1) expect(events).to.be.at.most(10);
      }
      expect(groups).to.deep.equal([[0, 1, 2, 3], [4, 5], [6, 7], [8], [9]]);
      expect(committer.stats).to.include({ batches: 10, transactions: 5, largestGroup: 4, retriedGroups: 0 });
    });

    it('retries each batch of a failed group alone, so only the batch that fails fails', async () => {
      const calls: number[][] = [];
      const committer = new GroupCommitter<number, string>(
        async (batches) => {
          calls.push(batches);
          await settle();
          if (batches.includes(2)) throw new Error(`cannot store ${batches.join(',')}`);
          return batches.map((b) => `stored ${b}`);
        },
        { maxInFlight: 1, maxBatches: 10, maxEvents: 100 },
      );
      const outcomes = await Promise.allSettled([0, 1, 2, 3].map((b) => committer.submit(b, 1)));
      expect(outcomes.map((o) => (o.status === 'fulfilled' ? o.value : (o.reason as Error).message))).to.deep.equal([
        'stored 0',
        'stored 1',
        'cannot store 2',
        'stored 3',
      ]);
      expect(calls).to.deep.equal([[0, 1, 2, 3], [0], [1], [2], [3]]);
      expect(committer.stats).to.include({ batches: 4, transactions: 5, retriedGroups: 1 });
    });

    it('fails the whole group at once for an error no batch caused (the database unavailable)', async () => {
      const calls: number[][] = [];
      const unavailable = Object.assign(new Error('Query read timeout'), { code: '57014' });
      const committer = new GroupCommitter<number, string>(
        async (batches) => {
          calls.push(batches);
          await settle();
          throw unavailable;
        },
        { maxInFlight: 1, maxBatches: 10, maxEvents: 100 },
        isDatabaseUnavailable,
      );
      const outcomes = await Promise.allSettled([0, 1, 2, 3].map((b) => committer.submit(b, 1)));
      expect(outcomes.map((o) => (o.status === 'rejected' ? o.reason : o.value))).to.deep.equal([unavailable, unavailable, unavailable, unavailable]);
      expect(calls, 'one attempt, not one more per batch').to.deep.equal([[0, 1, 2, 3]]);
      expect(committer.stats).to.include({ batches: 4, transactions: 1, retriedGroups: 0 });
    });

    it('runs at most maxInFlight transactions at once', async () => {
      let running = 0;
      let most = 0;
      const committer = new GroupCommitter<number, number>(
        async (batches) => {
          most = Math.max(most, ++running);
          await new Promise((resolve) => setTimeout(resolve, 5));
          running--;
          return batches;
        },
        { maxInFlight: 2, maxBatches: 3, maxEvents: 100 },
      );
      await Promise.all(Array.from({ length: 20 }, (_, i) => committer.submit(i, 1)));
      expect(most).to.equal(2);
    });

    it('lets a partial group wait for the transaction in flight, and starts a full one at once', async () => {
      const started: number[][] = [];
      const commits: (() => void)[] = [];
      const committer = new GroupCommitter<number, number>(
        async (batches) => {
          started.push(batches);
          await new Promise<void>((resolve) => commits.push(resolve));
          return batches;
        },
        { maxInFlight: 2, maxBatches: 10, maxEvents: 10 },
      );
      const submitted = [committer.submit(0, 1)];
      await settle();
      expect(started).to.deep.equal([[0]]);
      // Partial: it waits for the first transaction, however long that takes, and grows meanwhile.
      submitted.push(committer.submit(1, 1), committer.submit(2, 3));
      await settle();
      submitted.push(committer.submit(3, 1));
      await settle();
      expect(started).to.deep.equal([[0]]);
      // Full (10 events waiting): it starts beside the one in flight.
      submitted.push(committer.submit(4, 5));
      await settle();
      expect(started).to.deep.equal([[0], [1, 2, 3, 4]]);
      // Partial again: it waits until no transaction is in flight.
      submitted.push(committer.submit(5, 1));
      commits.shift()!();
      await settle();
      await settle();
      expect(started).to.deep.equal([[0], [1, 2, 3, 4]]);
      commits.shift()!();
      await settle();
      await settle();
      expect(started).to.deep.equal([[0], [1, 2, 3, 4], [5]]);
      commits.shift()!();
      expect(await Promise.all(submitted)).to.deep.equal([0, 1, 2, 3, 4, 5]);
    });
  });
});
