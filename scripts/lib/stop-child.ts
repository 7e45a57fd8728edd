import type { ChildProcess } from 'node:child_process';

/** SIGTERM, then its exit (at once when it has exited already: a server that failed to start). */
export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}
