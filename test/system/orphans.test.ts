import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { describeProcesses, isRunning, killPids, parentOf, processesWithEnv } from '../../scripts/lib/process-scan.ts';
import { TEST_RUNNER_PID_ENV } from '../../scripts/lib/test-runner-env.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { describeRun, ROOT, spawnProcess, stopLeftoverPostgres, waitFor, type RunningProcess } from '../helpers/server-process.ts';

/**
 * The processes a test run starts die with it, even when mocha is killed with SIGKILL and runs no
 * handler (test/helpers/run-reaper.ts). A mocha of its own runs a test that starts a server on an
 * embedded PostgreSQL and waits (test/system/fixtures/server-left-running.ts); once the server is
 * up, that mocha is SIGKILLed, and every process it started must be gone soon after. A marker in the
 * environment the inner mocha is given tells exactly those processes apart from everyone else's.
 */
describe('a killed test run leaves no process behind', function () {
  this.timeout(300_000);

  const MARKER = 'ORPHAN_TEST_MARKER';
  let marker: string;
  let dataDir: string | undefined;

  // The inner run's root hooks recreate the schema of the database they are given: a database of its own.
  const innerDatabase = `orphan_test_${process.pid}`;
  const sql = (statement: string) => testDatabase().orm.em.getConnection().execute(statement);
  before(async () => {
    await sql(`drop database if exists ${innerDatabase}`);
    await sql(`create database ${innerDatabase}`);
  });
  after(async () => {
    await sql(`drop database if exists ${innerDatabase} with (force)`);
  });

  afterEach(async () => {
    killPids(processesWithEnv(MARKER, marker));
    if (dataDir) {
      await stopLeftoverPostgres(dataDir);
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });

  /**
   * mocha as `npx mocha` runs it (.mocharc.json: the launcher, and the tests in its child), on the fixture only; or, with
   * `runner`, as `npm test` runs it (scripts/run-tests.ts, which starts that launcher).
   */
  async function startInnerRun(runner = false): Promise<{ run: RunningProcess; serverPid: number }> {
    marker = randomUUID();
    const url = new URL(testDatabase().url);
    url.pathname = `/${innerDatabase}`;
    const env: NodeJS.ProcessEnv = { ...process.env, [MARKER]: marker, DATABASE_URL: url.toString() };
    // The inner run is its own, not a shard of this one.
    delete env[TEST_RUNNER_PID_ENV];
    delete env.TEST_TIMINGS_OUT;
    const fixture = 'test/system/fixtures/server-left-running.ts';
    const run = runner
      ? spawnProcess(process.execPath, ['--import', 'tsx', path.join(ROOT, 'scripts', 'run-tests.ts'), fixture], env)
      : spawnProcess(process.execPath, [path.join(ROOT, 'node_modules', 'mocha', 'bin', 'mocha.js'), fixture], env);
    const ready = await waitFor(() => /server ready: pid (\d+), data (\S+)/.test(run.stdout) || run.child.exitCode !== null, 240_000);
    const match = /server ready: pid (\d+), data (\S+)/.exec(run.stdout);
    expect(ready && match, `the inner run did not start its server\n${describeRun(run)}`).to.not.equal(null);
    dataDir = match![2];
    return { run, serverPid: Number(match![1]) };
  }

  for (const victim of ['the mocha launcher', 'the mocha process running the tests', "npm test's runner"] as const) {
    it(`SIGKILL to ${victim} while a test's server runs: the server, its PostgreSQL and mocha itself are gone within 30 s`, async () => {
      const { run, serverPid } = await startInnerRun(victim === "npm test's runner");
      const started = processesWithEnv(MARKER, marker);
      const postgres = started.filter((pid) => /postgres/.test(describeProcesses([pid])));
      expect(started, 'the server and its PostgreSQL run').to.include(serverPid);
      expect(postgres.length, describeProcesses(started)).to.be.greaterThan(0);
      // The process running the tests is the one whose command line has mocha and no launcher of its own below it.
      const mochas = started.filter((pid) => pid !== run.child.pid && describeProcesses([pid]).includes('mocha'));
      const testsPid = mochas.find((pid) => !mochas.some((other) => parentOf(other) === pid));
      expect(testsPid, describeProcesses(started)).to.not.equal(undefined);

      process.kill(victim === 'the mocha process running the tests' ? testsPid! : victim === 'the mocha launcher' ? (parentOf(testsPid!) ?? NaN) : run.child.pid!, 'SIGKILL');
      const gone = await waitFor(() => processesWithEnv(MARKER, marker).length === 0, 30_000);
      expect(gone, `left running:\n${describeProcesses(processesWithEnv(MARKER, marker))}`).to.equal(true);
      // Gone from the scan (its environment unreadable) can be a moment before gone from the process table.
      const serverGone = await waitFor(() => !isRunning(serverPid), 5_000);
      expect(serverGone, describeProcesses([serverPid])).to.equal(true);
    });
  }
});
