import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { testDatabase } from '../helpers/hooks.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { launchBrowserOrSkip, watchErrors } from '../helpers/browser.ts';
import { openEventStream, SseParser, type EventStream, type SseMessage } from '../helpers/event-stream.ts';
import { describeRun, killAllProcesses, startServerProcess, stopWith, waitFor, type ServerProcess } from '../helpers/server-process.ts';
import { webhookPath } from '../helpers/webhook.ts';

/**
 * Live conversation streams (SSE) across two server processes on one database: events are posted
 * to A, subscribers listen on B, so every event crosses PostgreSQL's LISTEN/NOTIFY.
 */
describe('live conversation streams (two server instances)', function () {
  this.timeout(120_000);

  const BUFFER_BYTES = 64 * 1024;
  const HEARTBEAT_MS = 300;
  const MAX_PER_USER = 3;
  const STALL_MS = 1_500;

  let a: ServerProcess;
  let b: ServerProcess;
  let owner: UserFixture;
  const open: EventStream[] = [];

  const environment = (): NodeJS.ProcessEnv => ({
    ...process.env,
    DATABASE_URL: testDatabase().url,
    LOG_LEVEL: 'info',
    LIVE_STREAM_BUFFER_BYTES: String(BUFFER_BYTES),
    LIVE_STREAM_HEARTBEAT_MS: String(HEARTBEAT_MS),
    LIVE_STREAM_MAX_PER_USER: String(MAX_PER_USER),
    LIVE_STREAM_STALL_MS: String(STALL_MS),
    CREDENTIAL_CACHE_TTL_MS: '0',
  });

  before(async () => {
    [a, b] = await Promise.all([startServerProcess(environment()), startServerProcess(environment())]);
  });
  after(async () => {
    await killAllProcesses();
  });
  beforeEach(async () => {
    owner = await createUserFixture();
  });
  afterEach(() => {
    for (const stream of open.splice(0)) stream.close();
  });

  /** Posts a batch to A (or `server`); a string is sent as the JSON text it is. */
  async function post(conversationId: string, events: unknown[] | string, user = owner, server = a): Promise<void> {
    const response = await fetch(`${server.baseUrl}${webhookPath(conversationId)}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Session-API-Key': user.sessionApiKey },
      body: typeof events === 'string' ? events : JSON.stringify(events),
    });
    expect(response.status, await response.clone().text()).to.equal(200);
  }

  async function subscribe(
    conversationId: string,
    options: { user?: UserFixture; server?: ServerProcess; headers?: Record<string, string>; query?: string } = {},
  ): Promise<EventStream> {
    const server = options.server ?? b;
    const headers = options.headers ?? { 'X-Access-Token': (options.user ?? owner).accessToken };
    const stream = await openEventStream(
      `${server.baseUrl}/api/v1/conversations/${conversationId}/events/stream${options.query ?? ''}`,
      headers,
    );
    open.push(stream);
    return stream;
  }

  async function ticketFor(conversationId: string, user = owner, server = a): Promise<Response> {
    return fetch(`${server.baseUrl}/api/v1/conversations/${conversationId}/events/stream-tickets`, {
      method: 'POST',
      headers: { 'X-Access-Token': user.accessToken },
    });
  }

  const stored = (messages: SseMessage[]) => messages.filter((m) => m.event === 'event');
  const seqs = (messages: SseMessage[]) => stored(messages).map((m) => Number(m.id));
  const lastSeqOf = (messages: SseMessage[]) => seqs(messages).at(-1) ?? 0;
  const message = (text: string) =>
    minimalEvent('MessageEvent', { id: randomUUID(), llm_message: { role: 'user', content: [{ type: 'text', text }] } });
  const delta = (content: string) => minimalEvent('StreamingDeltaEvent', { content });

  /** A conversation of `owner` with one stored event (streams are for existing conversations). */
  async function newConversation(): Promise<string> {
    const conversationId = randomUUID();
    await post(conversationId, [message('first')]);
    return conversationId;
  }

  it('delivers on B, in order, every event posted to A: stored events with ids, deltas in between, status changes', async () => {
    const conversationId = await newConversation();
    const stream = await subscribe(conversationId);
    expect(stream.status).to.equal(200);
    expect(stream.headers['content-type']).to.match(/^text\/event-stream/);
    expect(await stream.until((m) => seqs(m).includes(1))).to.equal(true);

    // A number a double cannot hold goes out exactly as it came in.
    const posted: { deltas: string[]; ids: string[] }[] = [];
    const latencies: number[] = [];
    for (let batch = 0; batch < 15; batch++) {
      const events = [message(`m${batch}-a`), message(`m${batch}-b`)];
      const deltas = [`d${batch}-0`, `d${batch}-1`];
      const extra = batch === 7 ? [minimalEvent('ConversationStateUpdateEvent', { key: 'big', value: 'BIG' })] : [];
      const last = batch === 14 ? [minimalEvent('PauseEvent')] : [];
      const batchEvents = [delta(deltas[0]!), ...events, delta(deltas[1]!), ...extra, ...last];
      posted.push({ deltas, ids: [...events, ...extra, ...last].map((e) => e.id as string) });
      const sent = performance.now();
      await post(conversationId, JSON.stringify(batchEvents).replace('"BIG"', '123456789012345678901234567890'));
      // Every other batch: how long from sending it to A until B's subscriber has all of it.
      if (batch % 2 === 0) {
        const lastId = posted.at(-1)!.ids.at(-1)!;
        const has = (m: SseMessage[]) => m.findIndex((x) => x.event === 'event' && x.data.includes(lastId));
        await stream.until((m) => has(m) >= 0, 5_000);
        latencies.push(stream.parser.arrivals[has(stream.parser.messages)]! - sent);
      }
    }
    latencies.sort((x, y) => x - y);
    console.log(`      POST to A → its events on B: median ${latencies[latencies.length >> 1]!.toFixed(1)} ms, max ${latencies.at(-1)!.toFixed(1)} ms`);
    const total = 1 + posted.reduce((n, p) => n + p.ids.length, 0);
    const complete = await stream.until((m) => lastSeqOf(m) >= total && m.some((x) => x.event === 'status' && x.data.includes('paused')));
    expect(complete, `${total} ${JSON.stringify(stream.parser.messages.filter((m) => m.event !== 'event'))}`).to.equal(true);

    const messages = stream.parser.messages;
    expect(seqs(messages)).to.deep.equal(Array.from({ length: total }, (_, i) => i + 1));
    // The first status is the snapshot at subscription; the last one the pause.
    const statuses = messages.filter((m) => m.event === 'status').map((m) => JSON.parse(m.data));
    expect(messages[0]!.event).to.equal('status');
    expect(statuses.at(-1)).to.deep.equal({ execution_status: 'paused', last_seq: total });

    // Each batch: its deltas (published at commit, before its stored events), then its events.
    const afterFirst = messages.filter((m) => m.event === 'delta' || (m.event === 'event' && Number(m.id) > 1));
    const expected = posted.flatMap((p) => [...p.deltas.map((d) => `delta:${d}`), ...p.ids.map((id) => `event:${id}`)]);
    const actual = afterFirst.map((m) =>
      m.event === 'delta' ? `delta:${JSON.parse(m.data).content}` : `event:${JSON.parse(m.data).event.id}`,
    );
    expect(actual).to.deep.equal(expected);
    expect(messages.filter((m) => m.event === 'delta').every((m) => m.id === undefined)).to.equal(true);

    // Stored events read exactly as GET …/events shows them (same read path, same mapping).
    const rest = await fetch(`${a.baseUrl}/api/v1/conversations/${conversationId}/events?limit=1000`, {
      headers: { 'X-Access-Token': owner.accessToken },
    });
    const page = (await rest.text()).replace(/^\{"items":\[/, '');
    for (const item of stored(messages)) expect(page).to.include(item.data);
    expect(stored(messages).some((m) => m.data.includes('123456789012345678901234567890'))).to.equal(true);
  });

  it('resumes after a disconnection with Last-Event-ID (or after_seq): no gap, no duplicate, while events keep arriving', async () => {
    const conversationId = await newConversation();
    let producing = true;
    let postedEvents = 1;
    const producer = (async () => {
      for (let i = 0; producing && i < 400; i++) {
        await post(conversationId, [delta(`x${i}`), message(`live-${i}`), message(`live-${i}b`)]);
        postedEvents += 2;
      }
    })();

    const first = await subscribe(conversationId);
    expect(await first.until((m) => lastSeqOf(m) >= 20)).to.equal(true);
    first.close();
    const firstSeqs = seqs(first.parser.messages);
    const lastId = String(firstSeqs.at(-1));
    await new Promise((resolve) => setTimeout(resolve, 200)); // events keep coming meanwhile

    const second = await subscribe(conversationId, { headers: { 'X-Access-Token': owner.accessToken, 'Last-Event-ID': lastId } });
    expect(await second.until((m) => lastSeqOf(m) >= Number(lastId) + 40)).to.equal(true);
    second.close();
    const secondSeqs = seqs(second.parser.messages);

    // after_seq works too (for clients that open a new URL, such as the live page).
    const third = await subscribe(conversationId, { query: `?after_seq=${secondSeqs.at(-1)}` });
    expect(await third.until((m) => lastSeqOf(m) >= secondSeqs.at(-1)! + 10)).to.equal(true);
    producing = false;
    await producer;
    expect(await third.until((m) => lastSeqOf(m) >= postedEvents), `${lastSeqOf(third.parser.messages)} < ${postedEvents}`).to.equal(true);

    const all = [...firstSeqs, ...secondSeqs, ...seqs(third.parser.messages)];
    expect(all).to.deep.equal(Array.from({ length: postedEvents }, (_, i) => i + 1));
    expect(secondSeqs[0]).to.equal(Number(lastId) + 1);
  });

  it('drops a stalled subscriber (with a reason it can resume from) while ingestion keeps its speed', async () => {
    const conversationId = await newConversation();
    const big = (i: number) => [delta(`d${i}`), ...Array.from({ length: 10 }, (_, j) => message(`${i}-${j}-${'z'.repeat(16_000)}`))];

    const timeBatches = async (count: number, from: number) => {
      const times: number[] = [];
      for (let i = 0; i < count; i++) {
        const started = performance.now();
        await post(conversationId, big(from + i));
        times.push(performance.now() - started);
      }
      return times;
    };
    const median = (values: number[]) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)]!;

    const baseline = await timeBatches(10, 0);
    const stalled = await subscribe(conversationId);
    stalled.pause();
    const logBefore = b.stdout.length;
    const duringStall: number[] = [];
    let batches = 10;
    // Until B gives up on it: once the kernel's socket buffers and B's buffer are full and stay full.
    while (!b.stdout.slice(logBefore).includes('live subscriber dropped: too slow') && batches < 600) {
      duringStall.push(...(await timeBatches(5, batches)));
      batches += 5;
    }
    const droppedLog = b.stdout.slice(logBefore).split('\n').find((line) => line.includes('live subscriber dropped'));
    expect(droppedLog, describeRun(b)).to.not.equal(undefined);
    expect(await waitFor(() => b.stdout.slice(logBefore).includes('"endedBy":"slow_consumer"'), 5_000)).to.equal(true);
    const totalEvents = 1 + batches * 10;
    console.log(
      `      stalled subscriber dropped after ${batches - 10} batches (${(((batches - 10) * 10 * 16_000) / 1e6).toFixed(1)} MB); ` +
        `median POST ${median(baseline).toFixed(1)} ms before, ${median(duringStall).toFixed(1)} ms while stalled`,
    );
    // Ingestion does not wait for subscribers (generous bound: the machine is shared).
    expect(median(duringStall)).to.be.below(median(baseline) * 4 + 50);

    stalled.resume();
    await stalled.ended;
    const last = stalled.parser.messages.at(-1)!;
    expect(last.event).to.equal('error');
    const reason = JSON.parse(last.data);
    expect(reason).to.include({ reason: 'slow_consumer', last_event_id: lastSeqOf(stalled.parser.messages) });

    const resumed = await subscribe(conversationId, { headers: { 'X-Access-Token': owner.accessToken, 'Last-Event-ID': String(reason.last_event_id) } });
    // Catching up hundreds of 16 kB events through a 64 kB buffer: paced, not dropped.
    expect(await resumed.until((m) => lastSeqOf(m) >= totalEvents, 30_000)).to.equal(true);
    expect(resumed.parser.messages.filter((m) => m.event === 'error')).to.deep.equal([]);
    expect([...seqs(stalled.parser.messages), ...seqs(resumed.parser.messages)]).to.deep.equal(
      Array.from({ length: totalEvents }, (_, i) => i + 1),
    );
  });

  it("refuses another user's token (403), a missing one (401) and an unknown conversation (404)", async () => {
    const conversationId = await newConversation();
    const intruder = await createUserFixture();
    const refused = await subscribe(conversationId, { user: intruder });
    expect(refused.status).to.equal(403);
    expect(refused.refusal).to.have.property('detail');
    expect((await subscribe(conversationId, { headers: {} })).status).to.equal(401);
    expect((await subscribe(conversationId, { headers: { 'X-Access-Token': 'apat_nope' } })).status).to.equal(401);
    expect((await subscribe(randomUUID())).status).to.equal(404);
    expect((await ticketFor(conversationId, intruder)).status).to.equal(403);
    expect((await subscribe(conversationId, { headers: { 'X-Access-Token': owner.accessToken, 'Last-Event-ID': 'abc' } })).status).to.equal(422);
  });

  it('accepts a ticket once, on any instance, only for its conversation and only before it expires', async () => {
    const conversationId = await newConversation();
    const issued = await ticketFor(conversationId);
    expect(issued.status).to.equal(201);
    const { ticket, expires_at } = (await issued.json()) as { ticket: string; expires_at: string };
    expect(Date.parse(expires_at)).to.be.above(Date.now());
    const rows = await testDatabase().orm.em.getConnection().execute('select ticket_hash from stream_tickets');
    expect(JSON.stringify(rows)).to.not.include(ticket); // stored hashed

    // Issued by A, redeemed on B.
    const byTicket = await subscribe(conversationId, { headers: {}, query: `?ticket=${encodeURIComponent(ticket)}` });
    expect(byTicket.status).to.equal(200);
    expect(await byTicket.until((m) => seqs(m).includes(1))).to.equal(true);
    const again = await subscribe(conversationId, { headers: {}, query: `?ticket=${encodeURIComponent(ticket)}` });
    expect(again.status).to.equal(401);

    const other = await newConversation();
    const forOther = ((await (await ticketFor(other)).json()) as { ticket: string }).ticket;
    expect((await subscribe(conversationId, { headers: {}, query: `?ticket=${forOther}` })).status).to.equal(403);

    const expiring = ((await (await ticketFor(conversationId)).json()) as { ticket: string }).ticket;
    await testDatabase().orm.em.getConnection().execute("update stream_tickets set expires_at = now() - interval '1 second'");
    expect((await subscribe(conversationId, { headers: {}, query: `?ticket=${expiring}` })).status).to.equal(401);
  });

  it('sends heartbeats on an idle stream and bounds the streams per user (429)', async () => {
    const conversationId = await newConversation();
    const streams = [];
    for (let i = 0; i < MAX_PER_USER; i++) streams.push(await subscribe(conversationId));
    expect(streams.map((s) => s.status)).to.deep.equal(Array(MAX_PER_USER).fill(200));
    const tooMany = await subscribe(conversationId);
    expect(tooMany.status).to.equal(429);
    // Another instance counts its own.
    expect((await subscribe(conversationId, { server: a })).status).to.equal(200);

    await new Promise((resolve) => setTimeout(resolve, HEARTBEAT_MS * 3 + 200));
    expect(streams[0]!.parser.comments.filter((c) => c === 'heartbeat').length).to.be.at.least(2);

    streams[0]!.close();
    expect(await waitFor(async () => (await subscribe(conversationId)).status === 200, 5_000)).to.equal(true);
  });

  it('frees the slot of a client that goes away, even before its stream started', async () => {
    const conversationId = await newConversation();
    const url = `${b.baseUrl}/api/v1/conversations/${conversationId}/events/stream`;
    for (let i = 0; i < 10; i++) {
      const controller = new AbortController();
      const pending = fetch(url, { headers: { 'X-Access-Token': owner.accessToken }, signal: controller.signal }).catch(() => undefined);
      setTimeout(() => controller.abort(), i * 3);
      await pending;
    }
    const streams = [];
    // Within a moment every aborted stream has been noticed and is no longer counted: all
    // MAX_PER_USER slots open again (each noticed at its own moment, so keep trying), and no more.
    expect(
      await waitFor(async () => {
        const stream = await subscribe(conversationId);
        if (stream.status === 200) streams.push(stream);
        return streams.length === MAX_PER_USER;
      }, 5_000),
    ).to.equal(true);
    expect((await subscribe(conversationId)).status).to.equal(429);
  });

  it('takes Last-Event-ID over after_seq, and waits for events after the last one', async () => {
    const conversationId = await newConversation();
    await post(conversationId, [message('second'), message('third')]);
    const stream = await subscribe(conversationId, { headers: { 'X-Access-Token': owner.accessToken, 'Last-Event-ID': '2' }, query: '?after_seq=0' });
    expect(await stream.until((m) => seqs(m).length > 0)).to.equal(true);
    expect(seqs(stream.parser.messages)).to.deep.equal([3]);
    const ahead = await subscribe(conversationId, { query: '?after_seq=3' });
    await post(conversationId, [message('fourth')]);
    expect(await ahead.until((m) => seqs(m).length > 0)).to.equal(true);
    expect(seqs(ahead.parser.messages)).to.deep.equal([4]);
  });

  it('catches up after its listening connection is lost', async () => {
    const conversationId = await newConversation();
    const stream = await subscribe(conversationId);
    expect(await stream.until((m) => seqs(m).includes(1))).to.equal(true);
    const connection = testDatabase().orm.em.getConnection();
    const terminated = await connection.execute(
      "select pg_terminate_backend(pid) as done from pg_stat_activity where application_name = 'live-activity-listener' and datname = current_database()",
    );
    expect(terminated.length).to.be.at.least(1);
    await post(conversationId, [message('while reconnecting')]);
    await post(conversationId, [message('after')]);
    expect(await stream.until((m) => lastSeqOf(m) >= 3, 15_000), describeRun(b)).to.equal(true);
    expect(seqs(stream.parser.messages)).to.deep.equal([1, 2, 3]);
    // After reconnecting it also re-sends the status, which may have changed meanwhile.
    expect(stream.parser.messages.filter((m) => m.event === 'status').length).to.be.at.least(2);
    expect(await waitFor(async () => {
      const rows = await connection.execute(
        "select 1 from pg_stat_activity where application_name = 'live-activity-listener' and datname = current_database()",
      );
      return rows.length >= terminated.length;
    }, 15_000)).to.equal(true);
  });

  it('shows a conversation live in the console, reached through the old page address (ticket + EventSource)', async function () {
    const browser = await launchBrowserOrSkip(this);
    try {
      const conversationId = await newConversation();
      const page = await browser.newPage();
      const errors: string[] = [];
      watchErrors(page, errors);
      await page.goto(`${b.baseUrl}/live/conversations/${conversationId}`);
      expect(page.url()).to.equal(`${b.baseUrl}/#/conversations/${conversationId}`);
      await page.fill('#token', owner.accessToken);
      await page.click('#sign-in button[type=submit]');
      await page.locator('.row[data-seq="1"]').waitFor({ timeout: 10_000 });
      await page.locator('.connection[data-state="live"]').waitFor({ timeout: 10_000 });

      await post(conversationId, [delta('Hel'), delta('lo')]);
      await page.locator('#pending .text', { hasText: 'Hello' }).waitFor({ timeout: 10_000 });
      await post(conversationId, [message('second'), minimalEvent('PauseEvent')]);
      await page.locator('.row[data-seq="3"]').waitFor({ timeout: 10_000 });
      await page.locator('#live-status .badge[data-status="paused"]').waitFor({ timeout: 10_000 });
      expect(await page.textContent('.row[data-seq="2"] .text')).to.equal('second');
      expect(errors).to.deep.equal([]);
    } finally {
      await browser.close();
    }
  });

  it('ends open streams with a reason on shutdown, then exits cleanly', async () => {
    const conversationId = await newConversation();
    const stream = await subscribe(conversationId);
    expect(await stream.until((m) => seqs(m).includes(1))).to.equal(true);
    const { code } = await stopWith(b, 'SIGTERM');
    expect(code, describeRun(b)).to.equal(0);
    await stream.ended;
    const last = stream.parser.messages.at(-1)!;
    expect(last.event).to.equal('error');
    expect(JSON.parse(last.data)).to.include({ reason: 'server_shutdown', last_event_id: 1 });
  });
});

describe('SSE parser (test helper)', () => {
  it('splits events on blank lines, joins data lines, handles CRLF, comments and chunk boundaries', () => {
    const parser = new SseParser();
    const text = 'retry: 1000\r\n\r\n: heartbeat\n\nid: 7\nevent: event\ndata: {"a":\ndata: 1}\n\ndata: plain\r\rdata: z\r\nevent: after\r\n\r\nid: 8\nevent: x\n';
    for (const char of text) parser.push(char);
    expect(parser.retry).to.equal(1000);
    expect(parser.comments).to.deep.equal(['heartbeat']);
    expect(parser.messages).to.deep.equal([
      { event: 'event', data: '{"a":\n1}', id: '7' },
      { event: 'message', data: 'plain' },
      { event: 'after', data: 'z' },
    ]);
  });
});
