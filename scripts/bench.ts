/**
 * Webhook benchmark: a fixed workload against a real server process on loopback, and, as the
 * ceiling, the same rows inserted straight into PostgreSQL. Prints a Markdown table.
 *
 *   npm run bench                      # embedded PostgreSQL under .data/bench
 *   DATABASE_URL=postgres://… npm run bench
 *   BENCH_SECONDS=10 BENCH_CONNECTIONS=32 npm run bench
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import autocannon from 'autocannon';
import pg from 'pg';
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/db/database.ts';
import { createLogger } from '../src/logger.ts';
import { generateSecret, hashSecret } from '../src/identity/secrets.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const BATCH_SIZES = [1, 5, 100];
const CONVERSATIONS = 64;

/** One realistic ActionEvent (≈1 KB), the most common large event; `ID` is made unique per request. */
function actionEvent(index: number): string {
  return JSON.stringify({
    id: `ID-${index}`,
    timestamp: '2026-11-22T12:00:00.123456',
    source: 'agent',
    parent_id: null,
    kind: 'ActionEvent',
    thought: [{ cache_prompt: false, type: 'text', text: "I'll list the files to see the layout of the repository." }],
    reasoning_content: null,
    thinking_blocks: [],
    responses_reasoning_item: null,
    action: { command: 'ls -la', is_input: false, timeout: null, reset: false, kind: 'TerminalAction' },
    tool_name: 'terminal',
    tool_call_id: 'call_abc',
    tool_call: { id: 'call_abc', responses_item_id: null, name: 'terminal', arguments: '{"command": "ls -la"}', origin: 'completion' },
    llm_response_id: 'chatcmpl-123',
    security_risk: 'LOW',
    critic_result: null,
    summary: 'List files in the repository root',
  });
}

function batchBody(size: number): string {
  return `[${Array.from({ length: size }, (_, i) => actionEvent(i)).join(',')}]`;
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

async function waitForReady(url: string): Promise<void> {
  for (let attempt = 0; attempt < 200; attempt++) {
    try {
      if ((await fetch(`${url}/readyz`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the server did not become ready');
}

interface Row {
  batch: number;
  requestsPerSecond: number;
  eventsPerSecond: number;
  p50: number;
  p99: number;
  errors: number;
  ceilingEventsPerSecond: number;
}

async function loadServer(url: string, sessionKey: string, batch: number, seconds: number) {
  const conversations = Array.from({ length: CONVERSATIONS }, () => randomUUID());
  const body = batchBody(batch);
  const runId = randomUUID().slice(0, 8);
  let next = 0;
  const result = await autocannon({
    url,
    connections: CONNECTIONS,
    duration: seconds,
    requests: [
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-session-api-key': sessionKey },
        setupRequest(request) {
          const n = next++;
          request.path = `/api/v1/webhooks/events/${conversations[n % CONVERSATIONS]}`;
          request.body = body.replaceAll('"ID-', `"${runId}-${n}-`);
          return request;
        },
      },
    ],
  });
  return result;
}

/**
 * The same rows, inserted by a plain multi-row INSERT from as many connections as the server's pool
 * has (so both get the same commit concurrency): the ceiling.
 */
async function rawInsertRate(url: string, workers: number, ownerId: string, batch: number, seconds: number): Promise<number> {
  const pool = new pg.Pool({ connectionString: url, max: workers });
  const template = JSON.parse(batchBody(batch)) as Record<string, unknown>[];
  let events = 0;
  const deadline = Date.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      const conversationId = randomUUID();
      await pool.query('insert into conversations (id, owner_id) values ($1, $2)', [conversationId, ownerId]);
      let seq = 0;
      while (Date.now() < deadline) {
        const ids = template.map(() => randomUUID());
        const seqs = template.map(() => ++seq);
        await pool.query(
          `insert into conversation_events (conversation_id, seq, event_id, kind, payload)
           select $1, s, i, 'ActionEvent', p from unnest($2::int[], $3::text[], $4::jsonb[]) as t(s, i, p)`,
          [conversationId, seqs, ids, template.map((event, k) => JSON.stringify({ ...event, id: ids[k] }))],
        );
        events += batch;
      }
    }),
  );
  await pool.end();
  return events / seconds;
}

async function main(): Promise<void> {
  const config = loadConfig({
    ...process.env,
    DATA_DIR: process.env.BENCH_DATA_DIR ?? '.data/bench',
    EMBEDDED_PG_PORT: process.env.BENCH_EMBEDDED_PG_PORT ?? '54349',
  });
  const log = createLogger('warn');
  const database = await openDatabase(config.database, log);
  const connection = database.orm.em.getConnection();
  const ownerId = randomUUID();
  const sessionKey = generateSecret('session_api_key');
  await connection.execute('insert into users (id, email) values (?, ?)', [ownerId, `bench-${ownerId}@example.com`]);
  await connection.execute('insert into credentials (id, user_id, kind, secret_hash) values (?, ?, ?, ?)', [
    randomUUID(),
    ownerId,
    'session_api_key',
    hashSecret(sessionKey),
  ]);

  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const server = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: { ...process.env, DATABASE_URL: database.url, PORT: String(port), LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const rows: Row[] = [];
  try {
    await waitForReady(url);
    for (const batch of BATCH_SIZES) {
      await loadServer(url, sessionKey, batch, 2); // warm-up: JIT, pools, caches
      const result = await loadServer(url, sessionKey, batch, SECONDS);
      const ceiling = await rawInsertRate(database.url, config.database.poolSize, ownerId, batch, SECONDS);
      rows.push({
        batch,
        requestsPerSecond: result.requests.average,
        eventsPerSecond: result.requests.average * batch,
        p50: result.latency.p50,
        p99: result.latency.p99,
        errors: result.errors + result.non2xx,
        ceilingEventsPerSecond: ceiling,
      });
    }
  } finally {
    server.kill('SIGTERM');
    await new Promise((resolve) => server.once('exit', resolve));
    await connection.execute('delete from conversations where owner_id = ?', [ownerId]);
    await connection.execute('delete from users where id = ?', [ownerId]);
    await database.close();
  }

  const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
  console.log(
    `\n${CONNECTIONS} HTTP connections, ${config.database.poolSize} database connections, ${SECONDS} s per run, ` +
      `${CONVERSATIONS} conversations, ~1 KB ActionEvents\n`,
  );
  console.log('| batch | requests/s | events/s | p50 ms | p99 ms | non-2xx | raw INSERT events/s | ratio |');
  console.log('|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of rows) {
    console.log(
      `| ${r.batch} | ${fmt(r.requestsPerSecond)} | ${fmt(r.eventsPerSecond)} | ${r.p50} | ${r.p99} | ${r.errors} | ${fmt(r.ceilingEventsPerSecond)} | ${Math.round((100 * r.eventsPerSecond) / r.ceilingEventsPerSecond)} % |`,
    );
  }
  if (rows.some((r) => r.errors > 0)) process.exitCode = 1;
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
