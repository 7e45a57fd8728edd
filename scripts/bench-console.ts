/**
 * Console viewer benchmark (issue 33), in headless Chromium:
 * - opening a 100,000-event conversation: from the link to its newest event on screen (ms), and the
 *   rows in the DOM then;
 * - a 5,000-line file edit: computing the diff (jsdiff) and drawing it folded, until laid out (ms),
 *   for an edit of every 50th line, a new file, and two texts with no line in common.
 * Each figure is the median of RUNS runs. It starts a server on a database of its own and adds one
 * user and one conversation to it.
 *
 *   BENCH_CONSOLE_DATABASE_URL=postgres://postgres@127.0.0.1:5432/benchconsole npm run bench:console
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { chromium } from 'playwright-core';
import { buildConsole } from '../src/console/bundle.ts';
import { loadConfig } from '../src/config.ts';
import { migrate, openDatabase } from '../src/db/database.ts';
import { generateSecret, hashSecret } from '../src/identity/secrets.ts';
import { createLogger } from '../src/logger.ts';
import { serverNodeArgs } from '../src/server-node-flags.ts';
import { freePort } from './lib/free-port.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const EVENTS = 100_000;
const DIFF_LINES = 5_000;
const RUNS = Number(process.env.BENCH_CONSOLE_RUNS ?? 5);
const DATABASE_URL = process.env.BENCH_CONSOLE_DATABASE_URL ?? process.env.DATABASE_URL;

/** Debian's Chromium, as the browser tests use it. */
const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find((candidate): candidate is string => Boolean(candidate) && fs.existsSync(candidate!));

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function main(): Promise<void> {
  if (!DATABASE_URL) throw new Error('set BENCH_CONSOLE_DATABASE_URL (or DATABASE_URL) to a database of its own');
  const executablePath = CHROMIUM;
  if (!executablePath) throw new Error('no Chromium found (apt-get install -y chromium, or set CHROMIUM_PATH)');
  await buildConsole();
  const config = loadConfig({ ...process.env, DATABASE_URL, LOG_LEVEL: 'warn' });
  const database = await openDatabase(config.database, createLogger('warn'));
  await migrate(database.orm);
  const connection = database.orm.em.getConnection();
  const userId = randomUUID();
  const conversationId = randomUUID();
  const token = generateSecret('access_token');
  await connection.execute(`insert into users (id, email) values (?, ?)`, [userId, `bench-console-${userId}@example.com`]);
  await connection.execute(`insert into credentials (id, user_id, kind, secret_hash) values (?, ?, 'access_token', ?)`, [randomUUID(), userId, hashSecret(token)]);
  await connection.execute(`insert into conversations (id, owner_id, event_count, last_event_at) values (?, ?, ?, now())`, [conversationId, userId, EVENTS]);
  await connection.execute(
    `insert into conversation_events (conversation_id, seq, event_id, kind, event_time, source, payload)
     select ?, n, 'e' || n, 'MessageEvent', now(), case when n % 2 = 0 then 'agent' else 'user' end,
       json_build_object('kind', 'MessageEvent', 'id', 'e' || n, 'source', case when n % 2 = 0 then 'agent' else 'user' end,
         'timestamp', to_char(timestamp '2026-11-23 18:00:00' + n * interval '1 second', 'YYYY-MM-DD"T"HH24:MI:SS'),
         'llm_message', json_build_object('role', case when n % 2 = 0 then 'assistant' else 'user' end, 'content', json_build_array(json_build_object('type', 'text', 'text', 'event ' || n))))
     from generate_series(1, ?) n`,
    [conversationId, EVENTS],
  );

  const port = await freePort();
  const server = spawn(process.execPath, serverNodeArgs(), { cwd: ROOT, env: { ...process.env, DATABASE_URL, PORT: String(port), LOG_LEVEL: 'warn' }, stdio: ['ignore', 'ignore', 'inherit'] });
  const base = `http://127.0.0.1:${port}`;
  const browser = await chromium.launch({ executablePath, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
  try {
    for (let attempt = 0; !(await fetch(`${base}/readyz`).then((r) => r.ok, () => false)); attempt++) {
      if (attempt > 600) throw new Error('the server did not become ready');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await page.goto(`${base}/`);
    await page.fill('#token', token);
    await page.click('#sign-in button[type=submit]');
    await page.locator('#sign-out').waitFor();
    const opens: number[] = [];
    let rowsInDom = 0;
    for (let run = 0; run < RUNS; run++) {
      await page.evaluate(() => (location.hash = '#/account'));
      await page.locator('#balance').waitFor();
      // From the link to the newest event on screen, timed in the page.
      opens.push(
        await page.evaluate(
          // No named functions in here: tsx would wrap them in a helper the page does not have.
          async ({ id, last }) => {
            const started = performance.now();
            location.hash = `#/conversations/${id}`;
            while (!document.querySelector(`.row[data-seq="${last}"]`)) await new Promise((resolve) => requestAnimationFrame(resolve));
            return performance.now() - started;
          },
          { id: conversationId, last: EVENTS },
        ),
      );
      rowsInDom = await page.locator('.row[data-seq]').count();
    }
    console.log(`100,000-event conversation: newest event on screen in ${Math.round(median(opens))} ms (median of ${RUNS}: ${opens.map(Math.round).join(', ')}), ${rowsInDom} rows in the DOM`);

    // The diff module alone, on a blank page with the console's style sheet.
    const bundle = await build({
      stdin: { contents: `import { diffLines, linesOf, renderDiff } from './console/src/viewer/diff.ts'; Object.assign(window, { diffLines, linesOf, renderDiff });`, resolveDir: ROOT, loader: 'ts' },
      bundle: true,
      write: false,
      format: 'iife',
      target: 'es2022',
    });
    const blank = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await blank.setContent('<!doctype html><html><body><main></main></body></html>');
    await blank.addStyleTag({ content: fs.readFileSync(path.join(ROOT, 'console', 'src', 'console.css'), 'utf8') });
    await blank.addScriptTag({ content: bundle.outputFiles[0]!.text });
    for (const shape of ['every 50th line edited', 'a new file', 'no line in common'] as const) {
      const times: number[] = [];
      let drawn = 0;
      for (let run = 0; run < RUNS; run++) {
        const result = await blank.evaluate(
          ({ lines, shape }) => {
            const w = window as unknown as {
              diffLines(a: string, b: string): unknown[];
              linesOf(text: string, type: 'add'): unknown[];
              renderDiff(lines: unknown[], label: string): HTMLElement;
            };
            const before = Array.from({ length: lines }, (_, i) => `const value${i} = compute(${i}); // line ${i}`).join('\n');
            const after = shape === 'no line in common' ? before.replaceAll('const', 'let') : before.split('\n').map((line, i) => (i % 50 === 0 ? `${line} // edited` : line)).join('\n');
            const main = document.querySelector('main')!;
            main.replaceChildren();
            const started = performance.now();
            const diff = shape === 'a new file' ? w.linesOf(after, 'add') : w.diffLines(before, after);
            const element = w.renderDiff(diff, 'bench');
            main.append(element);
            void element.offsetHeight; // laid out
            return { ms: performance.now() - started, drawn: element.querySelectorAll('.diff-line').length, total: diff.length };
          },
          { lines: DIFF_LINES, shape },
        );
        times.push(result.ms);
        drawn = result.drawn;
        if (run === 0) console.log(`  ${shape}: ${result.total.toLocaleString()} diff lines, ${drawn} drawn until unfolded`);
      }
      console.log(`5,000-line diff, ${shape}: ${median(times).toFixed(1)} ms (median of ${RUNS}: ${times.map((t) => t.toFixed(1)).join(', ')})`);
    }
  } finally {
    await browser.close();
    server.kill('SIGTERM');
    await connection.execute('delete from conversation_events where conversation_id = ?', [conversationId]);
    await connection.execute('delete from conversations where id = ?', [conversationId]);
    await database.close();
  }
}

await main();
