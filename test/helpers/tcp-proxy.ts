import net from 'node:net';

/**
 * A TCP proxy on loopback between a server and PostgreSQL, to make the database fail on demand:
 * - `refuse()`: the database is gone (process stopped, host down): every open connection is reset
 *   and new connections are refused;
 * - `stall()`: the database hangs (overloaded host, network partition without resets): new
 *   connections are accepted but never answered, and bytes on open ones are silently dropped;
 * - `restore()`: traffic flows again (connections that lost bytes while stalled are closed, as a
 *   real partition would eventually do).
 */
export class TcpProxy {
  private server: net.Server;
  private mode: 'pass' | 'refuse' | 'stall' = 'pass';
  private readonly pairs = new Set<{ client: net.Socket; upstream?: net.Socket; damaged: boolean }>();

  private constructor(
    readonly port: number,
    private readonly targetPort: number,
  ) {
    this.server = this.createServer();
  }

  static async start(targetPort: number, port = 0): Promise<TcpProxy> {
    const proxy = new TcpProxy(port, targetPort);
    await proxy.listen(port);
    return proxy;
  }

  private createServer(): net.Server {
    return net.createServer((client) => {
      const pair: { client: net.Socket; upstream?: net.Socket; damaged: boolean } = { client, damaged: false };
      this.pairs.add(pair);
      const forget = () => {
        this.pairs.delete(pair);
        client.destroy();
        pair.upstream?.destroy();
      };
      client.on('error', forget).on('close', forget);
      if (this.mode === 'stall') {
        pair.damaged = true;
        client.on('data', () => {});
        return;
      }
      const upstream = net.connect(this.targetPort, '127.0.0.1');
      pair.upstream = upstream;
      upstream.on('error', forget).on('close', forget);
      client.on('data', (chunk) => (this.mode === 'pass' ? upstream.write(chunk) : (pair.damaged = true)));
      upstream.on('data', (chunk) => (this.mode === 'pass' ? client.write(chunk) : (pair.damaged = true)));
    });
  }

  private async listen(port: number): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, '127.0.0.1', () => resolve());
    });
    (this as { port: number }).port = (this.server.address() as net.AddressInfo).port;
  }

  /** Connections currently open through the proxy. */
  get connections(): number {
    return this.pairs.size;
  }

  async refuse(): Promise<void> {
    this.mode = 'refuse';
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const pair of this.pairs) {
      pair.client.resetAndDestroy();
      pair.upstream?.destroy();
    }
    this.pairs.clear();
    await closed;
  }

  stall(): void {
    this.mode = 'stall';
  }

  async restore(): Promise<void> {
    const wasRefusing = this.mode === 'refuse';
    for (const pair of [...this.pairs]) {
      if (pair.damaged) {
        pair.client.destroy();
        pair.upstream?.destroy();
        this.pairs.delete(pair);
      }
    }
    this.mode = 'pass';
    if (wasRefusing) {
      this.server = this.createServer();
      await this.listen(this.port);
    }
  }

  async close(): Promise<void> {
    for (const pair of this.pairs) {
      pair.client.destroy();
      pair.upstream?.destroy();
    }
    this.pairs.clear();
    if (this.server.listening) await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
