import net from 'node:net';

/** The ports `TEST_PORTS` (`first-last`) names, if it names a sane range. */
function portRange(value: string | undefined): { first: number; size: number } | undefined {
  const match = /^(\d+)-(\d+)$/.exec(value ?? '');
  if (!match) return undefined;
  const [first, last] = [Number(match[1]), Number(match[2])];
  return first >= 1024 && last <= 65535 && first <= last ? { first, size: last - first + 1 } : undefined;
}

function listenable(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.once('error', () => resolve(undefined));
    probe.listen(port, '127.0.0.1', () => {
      const { port: bound } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(bound));
    });
  });
}

/** Where the next pick in TEST_PORTS starts: moving on, so a port handed out is not handed out again soon. */
let cursor: number | undefined;

/**
 * A loopback port nothing listens on right now (for the scripts and the tests that start servers). A port
 * is picked before the server that takes it listens, seconds later; so in tests each shard of `npm test`
 * picks in a range of its own (TEST_PORTS: scripts/run-tests.ts, test/helpers/run-reaper.ts), below the
 * kernel's ephemeral range, where no other shard and no outgoing connection can take it meanwhile.
 * Elsewhere (the scripts) the kernel picks.
 */
export async function freePort(): Promise<number> {
  const range = portRange(process.env.TEST_PORTS);
  if (!range) {
    const port = await listenable(0);
    if (port === undefined) throw new Error('no free loopback port');
    return port;
  }
  cursor ??= Math.floor(Math.random() * range.size);
  for (let tried = 0; tried < range.size; tried++) {
    const port = await listenable(range.first + (cursor++ % range.size));
    if (port !== undefined) return port;
  }
  throw new Error(`no free port in TEST_PORTS=${process.env.TEST_PORTS}`);
}
