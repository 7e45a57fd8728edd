import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { expect } from 'chai';
import pg from 'pg';
import { ConfigError, loadConfig, type RetentionConfig } from '../../src/config.ts';
import { createLogger } from '../../src/logger.ts';
import { archiveFile } from '../../src/retention/archive.ts';
import { RETENTION_LOCK_ID, RetentionService } from '../../src/retention/retention-service.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { postEvents } from '../helpers/webhook.ts';

/** Retention (RETENTION_DAYS, RETENTION_ARCHIVE_DIR): src/retention/. */
describe('retention of conversations (RETENTION_DAYS)', function () {
  this.timeout(60_000);
  let app: TestApp;
  let user: UserFixture;
  let archiveDir: string;

  before(async () => {
    app = await createTestApp();
  });

  beforeEach(async () => {
    user = await createUserFixture();
    archiveDir = fs.mkdtempSync(path.join(os.tmpdir(), 'retention-'));
  });

  afterEach(() => fs.rmSync(archiveDir, { recursive: true, force: true }));

  const retention = (config: Partial<RetentionConfig> = {}) =>
    new RetentionService(
      testDatabase().orm.em,
      testDatabase().listenUrl,
      { days: 30, archiveDir: undefined, intervalMs: 3_600_000, batchEvents: 7, batchPauseMs: 0, ...config },
      createLogger('silent'),
    );
  const sql = (query: string, values: unknown[] = []) => testDatabase().orm.em.getConnection().execute(query, values);

  async function post(conversationId: string, count: number): Promise<void> {
    const events = Array.from({ length: count }, (_, i) =>
      minimalEvent('MessageEvent', { id: randomUUID(), llm_message: { role: 'user', content: [{ type: 'text', text: `message ${i} ✓ \u0000 big 12345678901234567890` }] } }),
    );
    await postEvents(app, user.sessionApiKey, conversationId, events).expect(200);
  }
  const age = (conversationId: string, days: number) =>
    sql(`update conversations set updated_at = now() - make_interval(days => ?) where id = ?`, [days, conversationId]);
  const eventCount = async (conversationId: string) =>
    Number(((await sql('select count(*) as n from conversation_events where conversation_id = ?', [conversationId])) as { n: string }[])[0]!.n);

  describe('configuration', () => {
    it('keeps everything when RETENTION_DAYS is unset, and refuses RETENTION_ARCHIVE_DIR without it or a RETENTION_DAYS below 1', () => {
      expect(loadConfig({}).retention).to.equal(undefined);
      expect(loadConfig({ RETENTION_DAYS: '30', RETENTION_ARCHIVE_DIR: '/tmp/a' }).retention).to.include({ days: 30, archiveDir: '/tmp/a' });
      expect(() => loadConfig({ RETENTION_ARCHIVE_DIR: '/tmp/a' })).to.throw(ConfigError, /RETENTION_DAYS/);
      expect(() => loadConfig({ RETENTION_DAYS: '0' })).to.throw(ConfigError, /RETENTION_DAYS/);
    });
  });

  it('deletes the conversations not updated for RETENTION_DAYS with all their events, in batches, and keeps the others', async () => {
    const expired = randomUUID();
    const recent = randomUUID();
    const almost = randomUUID();
    await post(expired, 25);
    await post(recent, 3);
    await post(almost, 2);
    await age(expired, 31);
    await age(almost, 29);

    const result = await retention({ batchEvents: 7 }).sweep();

    expect(result).to.deep.equal({ skipped: false, conversations: 1, events: 25, archived: 0 });
    await app.request.get(`/api/v1/conversations/${expired}`).set('X-Access-Token', user.accessToken).expect(404);
    expect(await eventCount(expired)).to.equal(0);
    expect(await eventCount(recent)).to.equal(3);
    expect(await eventCount(almost)).to.equal(2);
    await app.request.get(`/api/v1/conversations/${almost}`).set('X-Access-Token', user.accessToken).expect(200);
  });

  it('writes each conversation to RETENTION_ARCHIVE_DIR as gzipped NDJSON (the export) before deleting it: the conversation, then every event as GET …/events showed it', async () => {
    const conversationId = randomUUID();
    await post(conversationId, 12);
    await post(conversationId, 3);
    await age(conversationId, 40);
    const conversation = (await app.request.get(`/api/v1/conversations/${conversationId}`).set('X-Access-Token', user.accessToken).expect(200)).body;
    const events = (
      await app.request.get(`/api/v1/conversations/${conversationId}/events?limit=100`).set('X-Access-Token', user.accessToken).expect(200)
    ).text;

    const result = await retention({ archiveDir, batchEvents: 4 }).sweep();

    expect(result).to.deep.equal({ skipped: false, conversations: 1, events: 15, archived: 1 });
    expect(fs.readdirSync(archiveDir)).to.deep.equal([path.basename(archiveFile(archiveDir, conversationId))]);
    const lines = gunzipSync(fs.readFileSync(archiveFile(archiveDir, conversationId))).toString('utf8').trimEnd().split('\n');
    expect(lines).to.have.length(16);
    // The export's format (GET …/export): the conversation first, then the events.
    expect(JSON.parse(lines[0]!)).to.deep.include({ conversation });
    // Byte for byte the items of the event list (the stored text, NUL and long numbers included).
    expect(events.startsWith(`{"items":[${lines.slice(1).join(',')}],`), `${events.slice(0, 300)}\n${lines[1]}`).to.equal(true);
    await app.request.get(`/api/v1/conversations/${conversationId}`).set('X-Access-Token', user.accessToken).expect(404);
  });

  it('sweeps by itself every RETENTION_INTERVAL_MS once started, and stops when told', async () => {
    const conversationId = randomUUID();
    await post(conversationId, 3);
    await age(conversationId, 31);
    const service = retention({ intervalMs: 50 });
    service.start();
    try {
      const deadline = Date.now() + 10_000;
      while ((await eventCount(conversationId)) > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    } finally {
      await service.stop();
    }
    expect(await eventCount(conversationId)).to.equal(0);
    await app.request.get(`/api/v1/conversations/${conversationId}`).set('X-Access-Token', user.accessToken).expect(404);
  });

  it('sweeps on one instance at a time: while another holds the lock a sweep does nothing', async () => {
    const conversationId = randomUUID();
    await post(conversationId, 2);
    await age(conversationId, 31);
    const other = new pg.Client({ connectionString: testDatabase().listenUrl });
    await other.connect();
    try {
      await other.query('select pg_advisory_lock($1)', [RETENTION_LOCK_ID]);
      expect(await retention().sweep()).to.deep.equal({ skipped: true, conversations: 0, events: 0, archived: 0 });
      expect(await eventCount(conversationId)).to.equal(2);
      await other.query('select pg_advisory_unlock($1)', [RETENTION_LOCK_ID]);
      expect(await retention().sweep()).to.include({ skipped: false, conversations: 1, events: 2 });
    } finally {
      await other.end();
    }
  });

  it('keeps a conversation that receives a delivery while it is being deleted (each batch re-checks under the row lock)', async () => {
    const conversationId = randomUUID();
    await post(conversationId, 200);
    await age(conversationId, 31);
    const service = retention({ batchEvents: 1 });
    const sweeping = service.sweep();
    // A delivery arrives once the deletion (one event per transaction) has begun.
    while ((await eventCount(conversationId)) === 200) await new Promise((resolve) => setTimeout(resolve, 2));
    await post(conversationId, 1);
    const result = await sweeping;
    expect(result.conversations).to.equal(0);
    await app.request.get(`/api/v1/conversations/${conversationId}`).set('X-Access-Token', user.accessToken).expect(200);
    expect(await eventCount(conversationId)).to.be.greaterThan(0);
  });

  it('does not stall ingestion while a large conversation is deleted (webhook p99 measured during the deletion)', async function () {
    // RETENTION_TEST_EVENTS=500000 reproduces the figure in docs/scaling.md.
    const EVENTS = Number(process.env.RETENTION_TEST_EVENTS ?? 30_000);
    this.timeout(60_000 + EVENTS);
    const big = randomUUID();
    await sql(`insert into conversations (id, owner_id, event_count, updated_at) values (?, ?, ?, now() - interval '40 days')`, [big, user.userId, EVENTS]);
    await sql(
      `insert into conversation_events (conversation_id, seq, event_id, kind, event_time, source, payload)
       select ?, g, 'event-' || g, 'MessageEvent', now(), 'agent',
              json_build_object('kind', 'MessageEvent', 'id', 'event-' || g, 'source', 'agent',
                                'llm_message', json_build_object('role', 'assistant', 'content', json_build_array(json_build_object('type', 'text', 'text', repeat('x', 400)))))
         from generate_series(1, ?) g`,
      [big, EVENTS],
    );
    const live = randomUUID();
    const timed = async () => {
      const started = performance.now();
      await post(live, 5);
      return performance.now() - started;
    };
    const quantile = (values: number[], q: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * q))]!;
    const p99 = (values: number[]) => quantile(values, 0.99);
    const before: number[] = [];
    for (let i = 0; i < 100; i++) before.push(await timed());

    const during: number[] = [];
    let done = false;
    const started = performance.now();
    const sweeping = retention({ batchEvents: 2_000, batchPauseMs: 10 })
      .sweep()
      .finally(() => (done = true));
    while (!done) during.push(await timed());
    const result = await sweeping;
    const seconds = (performance.now() - started) / 1000;

    console.log(
      `      retention: ${EVENTS} events deleted in ${seconds.toFixed(2)} s (batches of 2000, 10 ms apart); webhook p50/p99 ` +
        `${quantile(during, 0.5).toFixed(1)}/${p99(during).toFixed(1)} ms during (${during.length} requests) vs ` +
        `${quantile(before, 0.5).toFixed(1)}/${p99(before).toFixed(1)} ms before`,
    );
    expect(result).to.deep.equal({ skipped: false, conversations: 1, events: EVENTS, archived: 0 });
    expect(during.length, 'deliveries went on during the deletion').to.be.greaterThan(5);
    // A stall would be a wait on a lock the deletion holds (up to the statement timeout), not a few milliseconds more.
    expect(p99(during)).to.be.below(2_000);
    expect(await eventCount(live)).to.equal(5 * (100 + during.length));
  });
});
