/**
 * Webhook benchmark, as issue 11 measures it: the shared bench kit's `run-all.sh` against this
 * server, next to the kit's Fastify peer and its raw-insert ceiling, all in one run on one database.
 * Prints a Markdown block (command, date, environment, table, ratios) to paste into the README.
 *
 *   npm run bench                                   # embedded PostgreSQL under .data/bench
 *   DATABASE_URL=postgres://… npm run bench         # a PostgreSQL of your own (tables peer_*, ceil_* are added)
 *   BENCH_KIT=/path/to/bench BENCH_SECONDS=10 BENCH_BATCHES="1 5 100" npm run bench
 *
 * The kit lives in `../shared/bench` unless BENCH_KIT says otherwise; its knobs (BENCH_SECONDS,
 * BENCH_BATCHES, BENCH_CONNECTIONS, BENCH_CONCURRENCY, BENCH_SELFTEST) pass through. The server runs
 * with the environment's settings (INGEST_*, DB_POOL_SIZE, …) and LOG_LEVEL=warn.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import { freePort } from '../test/helpers/free-port.ts';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/db/database.ts';
import { createLogger } from '../src/logger.ts';
import { generateSecret, hashSecret } from '../src/identity/secrets.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const KIT = path.resolve(ROOT, process.env.BENCH_KIT ?? '../shared/bench');

async function waitForReady(url: string): Promise<void> {
  for (let attempt = 0; attempt < 300; attempt++) {
    try {
      if ((await fetch(`${url}/readyz`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the server did not become ready');
}

/** Runs the kit; its progress goes to our standard error, its table comes back. */
async function runKit(databaseUrl: string, serverUrl: string, sessionKey: string): Promise<{ table: string; notes: string[] }> {
  const child = spawn('bash', [path.join(KIT, 'run-all.sh'), ROOT, databaseUrl, serverUrl, sessionKey], {
    env: process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let table = '';
  let errors = '';
  child.stdout.on('data', (chunk: Buffer) => (table += chunk));
  child.stderr.on('data', (chunk: Buffer) => {
    errors += chunk;
    process.stderr.write(chunk);
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`run-all.sh exited with ${code}`);
  // The environment line: PostgreSQL version, synchronous_commit, node, cpus, seconds per run.
  const notes = errors
    .split('\n')
    .filter((line) => line.startsWith('# PostgreSQL'))
    .map((line) => line.slice(2));
  return { table: table.trim(), notes };
}

async function main(): Promise<void> {
  if (!fs.existsSync(path.join(KIT, 'run-all.sh'))) {
    throw new Error(`no bench kit at ${KIT} (set BENCH_KIT to the directory holding run-all.sh)`);
  }
  const config = loadConfig({
    ...process.env,
    DATA_DIR: process.env.BENCH_DATA_DIR ?? '.data/bench',
    EMBEDDED_PG_PORT: process.env.BENCH_EMBEDDED_PG_PORT ?? '54349',
  });
  const database = await openDatabase(config.database, createLogger('warn'));
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

  const port = Number(process.env.BENCH_PORT ?? (await freePort()));
  const url = `http://127.0.0.1:${port}`;
  const server = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: database.url, PORT: String(port), LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const started = new Date();
  let result: { table: string; notes: string[] };
  try {
    await waitForReady(url);
    result = await runKit(database.url, url, sessionKey);
  } finally {
    server.kill('SIGTERM');
    await new Promise((resolve) => server.once('exit', resolve));
    await connection.execute('delete from conversation_events where conversation_id in (select id from conversations where owner_id = ?)', [ownerId]);
    await connection.execute('delete from conversations where owner_id = ?', [ownerId]);
    await connection.execute('delete from credentials where user_id = ?', [ownerId]);
    await connection.execute('delete from users where id = ?', [ownerId]);
    await database.close();
  }

  const knobs = ['BENCH_SECONDS', 'BENCH_BATCHES', 'BENCH_CONNECTIONS', 'BENCH_CONCURRENCY', 'BENCH_SELFTEST']
    .filter((name) => process.env[name] !== undefined)
    .map((name) => `${name}=${JSON.stringify(process.env[name])}`);
  const ingest = ['INGEST_MAX_TRANSACTIONS', 'INGEST_GROUP_MAX_BATCHES', 'INGEST_GROUP_MAX_EVENTS', 'DB_POOL_SIZE']
    .filter((name) => process.env[name] !== undefined)
    .map((name) => `${name}=${process.env[name]}`);
  const [table, ratios] = result.table.split(/\n\s*\n/);
  console.log(`\nMeasured ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC with \`${[...knobs, ...ingest, 'npm run bench'].join(' ')}\``);
  console.log(`(the bench kit's \`run-all.sh\`; database: ${config.database.kind === 'url' ? 'DATABASE_URL' : 'embedded PostgreSQL'}).`);
  for (const note of result.notes) console.log(`${note}.`);
  console.log(`\n${table}\n`);
  for (const line of (ratios ?? '').trim().split('\n').filter(Boolean)) console.log(`- ${line}`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
