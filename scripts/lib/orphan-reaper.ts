/**
 * `node --import tsx scripts/lib/orphan-reaper.ts <pid>… -- <NAME>=<value>`: waits until any of the
 * pids is gone, then stops every process whose environment holds `NAME=value` (SIGTERM, SIGKILL
 * after 10 s) and the first pid if it is still alive, and exits. The other pids are only watched: a
 * launcher whose child ended exits by itself, with the child's status, and must not be signalled. The test run starts one, detached, so that the
 * servers, PostgreSQL clusters and CLIs its tests start die with it even when mocha is SIGKILLed,
 * which runs no handler of its own.
 */
import { isRunning, processesWithEnv } from './process-scan.ts';

const POLL_MS = 500;
const GRACE_MS = 10_000;

function signal(pids: number[], name: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, name);
    } catch {
      // gone meanwhile
    }
  }
}

async function reapWhenGone(watched: number[], name: string, value: string): Promise<void> {
  while (watched.every(isRunning)) await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  const started = processesWithEnv(name, value);
  const all = () => [...new Set([...watched.slice(0, 1).filter(isRunning), ...processesWithEnv(name, value)])];
  // SIGTERM first: a server stops its embedded PostgreSQL, a cluster checkpoints.
  signal(all(), 'SIGTERM');
  const deadline = Date.now() + GRACE_MS;
  while (all().length > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
  signal(all(), 'SIGKILL');
  if (started.length > 0) process.stderr.write(`orphan-reaper: the test run ended; stopped ${started.length} processes it left\n`);
}

const args = process.argv.slice(2);
const separator = args.indexOf('--');
const [name, value] = (args[separator + 1] ?? '').split(/=(.*)/s, 2);
const watched = args.slice(0, separator).map(Number);
if (separator < 1 || !name || value === undefined || watched.some((pid) => !Number.isInteger(pid) || pid <= 0)) {
  process.stderr.write('usage: orphan-reaper.ts <pid>… -- <NAME>=<value>\n');
  process.exit(2);
}
await reapWhenGone(watched, name, value);
