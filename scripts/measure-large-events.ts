/**
 * Four concurrent 50 MiB single-event webhook posts against a server process of its own, as the
 * agent-server sends an event larger than its batch bound alone; then one event just under the
 * 64 MiB single-event limit. Every event is read back and compared; prints the server's resident
 * memory (VmRSS) before, at its peak (VmHWM) and after, and its growth. No timing assertions.
 *
 *   DATABASE_URL=postgres://… npm run measure:large-events      # or embedded PostgreSQL under .data/measure
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/db/database.ts';
import { createLogger } from '../src/logger.ts';
import { generateSecret, hashSecret } from '../src/identity/secrets.ts';
import { PACKAGE_ROOT } from '../src/package-root.ts';
import { serverNodeArgs } from '../src/server-node-flags.ts';
import { stopChild } from './lib/stop-child.ts';

const MiB = 1024 * 1024;
const CONCURRENT = 4;

/** VmRSS and VmHWM (the peak) of a process, in MiB. */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)![1]) / 1024;
  return { rss: kib('VmRSS'), peak: kib('VmHWM') };
}

/** One MessageEvent whose text makes the whole batch body `bytes` long. */
function singleEventBody(bytes: number): { id: string; text: string; body: string } {
  const id = randomUUID();
  const shell = (text: string) =>
    JSON.stringify([
      {
        kind: 'MessageEvent',
        id,
        timestamp: '2026-11-27T08:00:00.000000',
        source: 'agent',
        llm_message: { role: 'assistant', content: [{ type: 'text', text }] },
      },
    ]);
  const text = `${id} `.padEnd(bytes - Buffer.byteLength(shell('')), 'completion log line with a screenshot in base64 ');
  return { id, text, body: shell(text) };
}

async function waitForReady(url: string): Promise<void> {
  for (let attempt = 0; attempt < 600; attempt++) {
    try {
      if ((await fetch(`${url}/readyz`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('the server did not become ready');
}

async function main(): Promise<void> {
  const config = loadConfig({ ...process.env, DATA_DIR: process.env.MEASURE_DATA_DIR ?? '.data/measure', EMBEDDED_PG_PORT: '25459' });
  const database = await openDatabase(config.database, createLogger('warn'));
  const connection = database.orm.em.getConnection();
  const ownerId = randomUUID();
  const sessionKey = generateSecret('session_api_key');
  const accessToken = generateSecret('access_token');
  await connection.execute('insert into users (id, email) values (?, ?)', [ownerId, `measure-${ownerId}@example.com`]);
  for (const [kind, secret] of [['session_api_key', sessionKey], ['access_token', accessToken]] as const) {
    await connection.execute('insert into credentials (id, user_id, kind, secret_hash) values (?, ?, ?, ?)', [randomUUID(), ownerId, kind, hashSecret(secret)]);
  }
  // Above the ephemeral port range, which clients' connections use.
  const port = 61_000 + Math.floor(Math.random() * 4_000);
  const url = `http://127.0.0.1:${port}`;
  const server = spawn(process.execPath, serverNodeArgs(path.join(PACKAGE_ROOT, 'src', 'main.ts')), {
    cwd: PACKAGE_ROOT,
    env: { ...process.env, DATABASE_URL: database.url, PORT: String(port), LOG_LEVEL: 'warn', OUTBOUND_WEBHOOK_WORKER: 'false' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  try {
    await waitForReady(url);
    await fetch(`${url}/readyz`);
    const before = memoryOf(server.pid!);
    const post = async (body: string) => {
      const conversationId = randomUUID();
      const response = await fetch(`${url}/api/v1/webhooks/events/${conversationId.replace(/-/g, '')}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-session-api-key': sessionKey },
        body,
      });
      await response.arrayBuffer();
      return { conversationId, status: response.status };
    };
    const readBack = async (conversationId: string, id: string, text: string) => {
      const response = await fetch(`${url}/api/v1/conversations/${conversationId}/events`, { headers: { 'x-access-token': accessToken } });
      const page = (await response.json()) as { items: { event: { id: string; llm_message: { content: { text: string }[] } } }[] };
      const event = page.items[0]?.event;
      return page.items.length === 1 && event?.id === id && event.llm_message.content[0]?.text === text;
    };

    const events = Array.from({ length: CONCURRENT }, () => singleEventBody(50 * MiB));
    const started = performance.now();
    const posted = await Promise.all(events.map((event) => post(event.body)));
    const seconds = (performance.now() - started) / 1000;
    const during = memoryOf(server.pid!);
    const identical = await Promise.all(posted.map((p, i) => readBack(p.conversationId, events[i]!.id, events[i]!.text)));
    events.length = 0;
    const largest = singleEventBody(64 * MiB - 1024);
    const last = await post(largest.body);
    const largestIdentical = await readBack(last.conversationId, largest.id, largest.text);
    const after = memoryOf(server.pid!);

    console.log(`${CONCURRENT} concurrent single-event posts of 50 MiB: statuses ${posted.map((p) => p.status).join(', ')} in ${seconds.toFixed(1)} s; read back identical: ${identical.join(', ')}`);
    console.log(`one event of ${((64 * MiB - 1024) / MiB).toFixed(3)} MiB: status ${last.status}; read back identical: ${largestIdentical}`);
    console.log(`server RSS before: ${before.rss.toFixed(0)} MiB; peak (VmHWM) during the four posts: ${during.peak.toFixed(0)} MiB; peak after all reads: ${after.peak.toFixed(0)} MiB; RSS at the end: ${after.rss.toFixed(0)} MiB`);
    console.log(`peak RSS growth: ${(during.peak - before.rss).toFixed(0)} MiB for ${CONCURRENT * 50} MiB of bodies (${((during.peak - before.rss) / (CONCURRENT * 50)).toFixed(1)} x); with the reads: ${(after.peak - before.rss).toFixed(0)} MiB`);
  } finally {
    await stopChild(server);
    await connection.execute('delete from conversation_events where conversation_id in (select id from conversations where owner_id = ?)', [ownerId]);
    await connection.execute('delete from conversations where owner_id = ?', [ownerId]);
    await connection.execute('delete from credentials where user_id = ?', [ownerId]);
    await connection.execute('delete from users where id = ?', [ownerId]);
    await database.close();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
