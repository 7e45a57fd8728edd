import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { shardServerPorts, TEST_RUNNER_PID_ENV } from '../../scripts/lib/test-runner-env.ts';

/**
 * Loaded first by mocha (.mocharc.json): marks this test run in the environment that every process a
 * test starts inherits (servers, npm, the embedded PostgreSQL clusters and their backends, CLIs,
 * PgBouncer), and starts a detached reaper (scripts/lib/orphan-reaper.ts) that stops whatever carries
 * the mark once mocha is gone, however it ended: a SIGKILLed mocha runs no handler, and an orphaned
 * server would go on polling a shared database. Under `npm test` the reaper also watches its runner
 * (scripts/run-tests.ts), so a SIGKILLed runner takes its shards with it.
 */
export const TEST_RUN_ENV = 'AGENT_PLATFORM_TEST_RUN';

const ROOT = path.resolve(import.meta.dirname, '..', '..');

function commandLineOf(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}

const runId = `${process.pid}-${randomBytes(6).toString('hex')}`;
process.env[TEST_RUN_ENV] = runId;
// A mocha run on its own (`npx mocha <file>`) picks its servers' ports as shard 1 of `npm test` does.
process.env.TEST_PORTS ??= shardServerPorts(1);
// Given node options (.mocharc's import=tsx), mocha runs the tests in a child process: either dying ends the run.
// This process comes first, the one the reaper stops; the launcher is only watched (it exits with our status).
// The runner of `npm test`, when there is one, is watched too: killed, it can stop none of its shards.
const runner = Number(process.env[TEST_RUNNER_PID_ENV]);
const watched = [
  process.pid,
  ...(commandLineOf(process.ppid).includes('mocha') ? [process.ppid] : []),
  ...(Number.isInteger(runner) && runner > 0 ? [runner] : []),
];
const reaperEnv: NodeJS.ProcessEnv = { ...process.env };
delete reaperEnv[TEST_RUN_ENV];
spawn(
  process.execPath,
  ['--import', 'tsx', path.join(ROOT, 'scripts', 'lib', 'orphan-reaper.ts'), ...watched.map(String), '--', `${TEST_RUN_ENV}=${runId}`],
  { cwd: ROOT, env: reaperEnv, detached: true, stdio: ['ignore', 'ignore', 'inherit'] },
).unref();
