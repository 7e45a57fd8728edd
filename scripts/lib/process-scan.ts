import fs from 'node:fs';

/**
 * The pids of live processes whose environment holds `NAME=value`. Every server a test or script
 * starts gets a unique data directory, so `processesWithEnv('DATA_DIR', dataDir)` finds exactly what
 * it started and whatever that started in turn (npm, sh, node, the embedded PostgreSQL and its
 * backends, which inherit the environment) — and nothing anybody else started.
 */
export function processesWithEnv(name: string, value: string): number[] {
  const needle = Buffer.from(`${name}=${value}\0`);
  const found: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    try {
      const environ = fs.readFileSync(`/proc/${pid}/environ`);
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (/\) Z /.test(stat)) continue; // a zombie is gone, only not yet reaped
      if (environ.includes(needle)) found.push(pid);
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}

/** A process's parent pid, from /proc (undefined once it is gone). */
export function parentOf(pid: number): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name in parentheses may hold spaces: the fields after the last ')' are state, then ppid.
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}

/** Alive and not a zombie (a killed process stays one until its parent reaps it). */
export function isRunning(pid: number): boolean {
  try {
    return !/\) Z /.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** A short description of processes for assertion messages. */
export function describeProcesses(pids: number[]): string {
  return pids
    .map((pid) => {
      try {
        return `${pid}: ${fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim()}`;
      } catch {
        return `${pid}: (gone)`;
      }
    })
    .join('\n');
}

/** SIGKILLs the given pids (processes a test started and failed to stop). */
export function killPids(pids: number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}
