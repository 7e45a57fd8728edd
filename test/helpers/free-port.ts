import net from 'node:net';

/**
 * A loopback port nothing listens on right now. No other imports, so that the scripts that start
 * servers (`scripts/bench.ts`, `scripts/measure-start.ts`) use it too without loading test hooks.
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}
