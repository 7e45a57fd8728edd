/**
 * Runs the README's walkthrough, so that the README cannot rot: `npm run walkthrough`.
 *
 * Takes the shell block that follows `<!-- walkthrough -->` in README.md, starts a fresh `npm start`
 * (its own port; its own embedded PostgreSQL under `.data/walkthrough-…`, or `DATABASE_URL` when
 * set), runs the block with `bash -Eeuo pipefail` against it (`BASE` pointing at that server), stops
 * at the first command that fails and names it with its README line, then stops the server with
 * SIGTERM and checks that nothing it started is left running. Exit code 0 only if all of it held.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from './lib/free-port.ts';
import { describeProcesses, killPids, processesWithEnv } from './lib/process-scan.ts';

export const ROOT = path.resolve(import.meta.dirname, '..');
export const MARKER = '<!-- walkthrough -->';

export interface Walkthrough {
  /** The shell commands, as written in the README. */
  script: string;
  /** README line of the block's first command (1-based). */
  firstLine: number;
}

/** The fenced `sh` block right after the marker line; throws when there is none. */
export function extractWalkthrough(markdown: string): Walkthrough {
  const lines = markdown.split('\n');
  const marker = lines.findIndex((line) => line.trim() === MARKER);
  if (marker < 0) throw new Error(`no "${MARKER}" line in the README`);
  let open = marker + 1;
  while (open < lines.length && lines[open]!.trim() === '') open++;
  if (!/^```(sh|bash)\s*$/.test(lines[open] ?? '')) throw new Error(`"${MARKER}" is not followed by a \`\`\`sh block`);
  const close = lines.findIndex((line, i) => i > open && line.trim() === '```');
  if (close < 0) throw new Error('the walkthrough block is not closed');
  return { script: lines.slice(open + 1, close).join('\n'), firstLine: open + 2 };
}

export interface WalkthroughResult {
  /** bash's exit code (null if it was killed at the time limit). */
  code: number | null;
  /** What the walkthrough printed, standard output and error interleaved. */
  output: string;
  /** "README.md line N: <command>" of the command that failed, if one did. */
  failed?: string;
  /** The server's exit code after SIGTERM. */
  serverExitCode: number | null;
  serverLog: string;
  /** Processes started for this run still alive after the server stopped (then killed). */
  leftovers: string;
  ms: number;
}

interface Options {
  env?: NodeJS.ProcessEnv;
  timeoutMs?: number;
  /** Where the server's log lines go as they come (tests hand them to their secret scan). */
  onServerLog?: (text: string) => void;
}

/**
 * Line 1 of what bash runs: the ERR trap reports the line of the failing command — inside a function
 * (`-E` makes the trap apply there), the line that called it — so the README line can be named.
 * Subshells (`$(…)`, background jobs) stay quiet: the command of the main shell that ran them reports.
 */
const PRELUDE =
  `trap 'rc=$?; set +u; [ $BASH_SUBSHELL -eq 0 ] || exit $rc; line=$LINENO; [ -n "\${FUNCNAME[0]}" ] && line=\${BASH_LINENO[\${#FUNCNAME[@]}-1]}; ` +
  `echo "walkthrough: exit $rc at line $line" >&2' ERR\n`;

/** Runs `walkthrough` against a fresh `npm start` and stops that server again. */
export async function runWalkthrough(walkthrough: Walkthrough, options: Options = {}): Promise<WalkthroughResult> {
  const started = Date.now();
  const runId = randomBytes(8).toString('hex');
  const env: NodeJS.ProcessEnv = { ...(options.env ?? process.env), WALKTHROUGH_RUN: runId, LOG_LEVEL: 'info' };
  delete env.BASE;
  let dataDir: string | undefined;
  if (!env.DATABASE_URL) {
    // Not mkdtemp (0700): as root the embedded PostgreSQL runs as "postgres", which must traverse it.
    dataDir = path.join(ROOT, '.data', `walkthrough-${runId}`);
    fs.mkdirSync(dataDir, { recursive: true, mode: 0o755 });
    fs.chmodSync(dataDir, 0o755);
    env.DATA_DIR = dataDir;
    env.EMBEDDED_PG_PORT = String(await freePort());
  }
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const server = spawn('npm', ['start'], { cwd: ROOT, env: { ...env, PORT: String(port) } });
  let serverLog = '';
  const onLog = (chunk: Buffer) => {
    serverLog += chunk.toString();
    options.onServerLog?.(chunk.toString());
  };
  server.stdout.on('data', onLog);
  server.stderr.on('data', onLog);
  const serverExited = new Promise<number | null>((resolve) => server.once('exit', (code) => resolve(code)));

  let result: Pick<WalkthroughResult, 'code' | 'output' | 'failed'>;
  try {
    await waitUntilReady(base, server, () => serverLog);
    result = await runScript(walkthrough, { ...env, BASE: base }, options.timeoutMs ?? 180_000);
  } finally {
    server.kill('SIGTERM');
  }
  let timer: NodeJS.Timeout | undefined;
  const serverExitCode = await Promise.race([
    serverExited,
    new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), 30_000))),
  ]);
  clearTimeout(timer);
  if (serverExitCode === 'timeout') server.kill('SIGKILL');
  // Whatever carries this run's marker in its environment was started by it: npm, the server, its
  // PostgreSQL and backends, the admin CLI, curl.
  await waitFor(() => processesWithEnv('WALKTHROUGH_RUN', runId).length === 0, 10_000);
  const left = processesWithEnv('WALKTHROUGH_RUN', runId);
  const leftovers = describeProcesses(left);
  killPids(left);
  if (dataDir && left.length === 0) fs.rmSync(dataDir, { recursive: true, force: true });
  return {
    ...result,
    serverExitCode: serverExitCode === 'timeout' ? null : serverExitCode,
    serverLog,
    leftovers,
    ms: Date.now() - started,
  };
}

async function waitUntilReady(base: string, server: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    if (server.exitCode !== null) throw new Error(`npm start exited with ${server.exitCode} before it was ready\n${log()}`);
    try {
      if ((await fetch(`${base}/readyz`)).status === 200) return;
    } catch {
      // not listening yet
    }
    await delay(200);
  }
  throw new Error(`npm start was not ready within 120 s\n${log()}`);
}

function runScript(walkthrough: Walkthrough, env: NodeJS.ProcessEnv, timeoutMs: number) {
  return new Promise<Pick<WalkthroughResult, 'code' | 'output' | 'failed'>>((resolve) => {
    // No startup file: given a socket as stdin (Node's 'pipe') and no SHLVL (started outside a shell, as
    // under CI), bash takes itself for a remote shell and sources /etc/bash.bashrc and ~/.bashrc; the
    // script then runs in a `source` frame whose line is 0, and the ERR trap named README line "0 - 2".
    // Its own process group, so that a time-out ends the background jobs too.
    const bash = spawn('bash', ['--norc', '--noprofile', '-Eeuo', 'pipefail', '-c', PRELUDE + walkthrough.script], {
      cwd: ROOT,
      env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    bash.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    bash.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => {
      output += `\nwalkthrough: stopped after ${timeoutMs} ms\n`;
      process.kill(-bash.pid!, 'SIGKILL');
    }, timeoutMs);
    bash.once('close', (code) => {
      clearTimeout(timer);
      const trap = /walkthrough: exit \d+ at line (\d+)/.exec(output);
      // The prelude is line 1 of what bash runs.
      const index = trap ? Number(trap[1]) - 2 : -1;
      const failed = trap ? `README.md line ${walkthrough.firstLine + index}: ${walkthrough.script.split('\n')[index]?.trim()}` : undefined;
      resolve({ code, output, failed });
    });
  });
}

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(condition: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) return false;
    await delay(100);
  }
  return true;
}

/** `npm run walkthrough [README path]`: prints what the walkthrough printed, then the verdict. */
async function main(readme: string): Promise<number> {
  const result = await runWalkthrough(extractWalkthrough(fs.readFileSync(readme, 'utf8')));
  process.stdout.write(result.output);
  const ok = result.code === 0 && result.serverExitCode === 0 && !result.leftovers;
  if (result.failed) console.error(`\nFAILED at ${result.failed}`);
  if (result.serverExitCode !== 0) console.error(`npm start exited with ${result.serverExitCode} after SIGTERM\n${result.serverLog.slice(-4000)}`);
  if (result.leftovers) console.error(`left running (now killed):\n${result.leftovers}`);
  console.error(`\nwalkthrough ${ok ? 'passed' : 'FAILED'} in ${(result.ms / 1000).toFixed(1)} s`);
  return ok ? 0 : 1;
}

// No top-level await: mocha loads the tests that import this file with require(), as it loads the
// root hooks, so they share one instance of each helper module.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  void main(process.argv[2] ?? path.join(ROOT, 'README.md')).then((code) => (process.exitCode = code));
}
