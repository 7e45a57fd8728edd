import type { Server } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { expect } from 'chai';
import { createApp } from '../../src/app.ts';
import type { Config } from '../../src/config.ts';
import { createHttpServer } from '../../src/http-server.ts';
import { createLogger } from '../../src/logger.ts';
import { testConfig, testDatabase } from '../helpers/hooks.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { sendWhileReading } from '../helpers/raw-http.ts';

const MiB = 1024 * 1024;
const FIVE_MIB = 5 * MiB;

/**
 * When we answer before reading a request's body (401, 413, 422 on a GET with a body), the server
 * keeps reading and discarding the body for `HTTP_LINGER_MS` and up to `HTTP_LINGER_BYTES` before it
 * closes, as nginx's lingering close does, so a client still writing its body reads our whole answer
 * and finishes writing, instead of meeting a reset. Raw sockets, so nothing in between reads for us.
 */
describe('lingering close: an answer given before the request body is read', () => {
  let user: UserFixture;
  const servers: Server[] = [];

  async function serve(overrides: Partial<Config> = {}): Promise<number> {
    const config = { ...testConfig(), bodyLimitBytes: MiB, httpRequestTimeoutMs: 600_000, ...overrides };
    const database = testDatabase();
    const { app } = await createApp({ config, logger: createLogger('silent'), orm: database.orm, database });
    const server = createHttpServer(app, config);
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return (server.address() as AddressInfo).port;
  }

  let port: number;
  before(async () => {
    port = await serve();
  });
  beforeEach(async () => {
    user = await createUserFixture();
  });
  after(async () => {
    for (const server of servers) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  const head = (requestLine: string, headers: Record<string, string | number>) =>
    `${requestLine}\r\nHost: x\r\n${Object.entries(headers)
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('')}\r\n`;
  const slowly = { total: FIVE_MIB, chunkBytes: 64 * 1024, pauseMs: 1 };

  const cases: { title: string; status: number; connection: string; request: () => string; chunked?: boolean }[] = [];
  for (const connection of ['close', 'keep-alive']) {
    cases.push(
      {
        title: `401 on a GET with a 5 MiB body and no credential (Connection: ${connection})`,
        status: 401,
        connection,
        request: () => head('GET /api/v1/conversations HTTP/1.1', { Connection: connection, 'Content-Type': 'application/json', 'Content-Length': FIVE_MIB }),
      },
      {
        title: `422 on a GET with a 5 MiB body and an unknown query parameter (Connection: ${connection})`,
        status: 422,
        connection,
        request: () =>
          head('GET /api/v1/conversations?no_such_parameter=1 HTTP/1.1', {
            Connection: connection,
            'X-Access-Token': user.accessToken,
            'Content-Type': 'application/json',
            'Content-Length': FIVE_MIB,
          }),
      },
      {
        title: `413 on a 5 MiB body announced past the 1 MiB limit (Connection: ${connection})`,
        status: 413,
        connection,
        request: () =>
          head('POST /api/billing/create-checkout-session HTTP/1.1', {
            Connection: connection,
            'X-Access-Token': user.accessToken,
            'Content-Type': 'application/json',
            'Content-Length': FIVE_MIB,
          }),
      },
      {
        title: `413 on a chunked 5 MiB body, refused once 1 MiB was read (Connection: ${connection})`,
        status: 413,
        connection,
        chunked: true,
        request: () =>
          head('POST /api/billing/create-checkout-session HTTP/1.1', {
            Connection: connection,
            'X-Access-Token': user.accessToken,
            'Content-Type': 'application/json',
            'Transfer-Encoding': 'chunked',
          }),
      },
    );
  }

  for (const { title, status, request, chunked } of cases) {
    it(`${title}: the client writes its whole body and reads the whole answer`, async () => {
      const exchange = await sendWhileReading(port, request(), { ...slowly, chunked });
      expect(exchange.error, 'the connection was reset under the client').to.equal(undefined);
      expect(exchange.status).to.equal(status);
      expect(exchange.complete, `the whole answer: ${exchange.body.slice(0, 200)}`).to.equal(true);
      expect(JSON.parse(exchange.body)).to.have.property('detail');
      expect(exchange.bytesWritten).to.equal(FIVE_MIB);
    });
  }

  it('stops discarding past HTTP_LINGER_BYTES: an endless body is cut off after the answer', async () => {
    const smallLinger = await serve({ httpLingerBytes: MiB });
    const exchange = await sendWhileReading(
      smallLinger,
      head('GET /api/v1/conversations HTTP/1.1', { Connection: 'close', 'Content-Type': 'application/json', 'Content-Length': 1024 * MiB }),
      { total: 1024 * MiB, chunkBytes: 64 * 1024 },
    );
    expect(exchange.status).to.equal(401);
    expect(exchange.complete).to.equal(true);
    expect(exchange.error).to.be.oneOf(['EPIPE', 'ECONNRESET']);
    // The linger's 1 MiB plus what the two sockets' buffers hold.
    expect(exchange.bytesWritten).to.be.below(16 * MiB);
  });

  it('stops discarding after HTTP_LINGER_MS: a body trickling for ever is cut off after the answer', async function () {
    this.timeout(30_000);
    const shortLinger = await serve({ httpLingerMs: 300 });
    const exchange = await sendWhileReading(
      shortLinger,
      head('GET /api/v1/conversations HTTP/1.1', { 'Content-Type': 'application/json', 'Content-Length': 1024 * MiB }),
      { total: 1024 * MiB, chunkBytes: 1024, pauseMs: 20 },
    );
    expect(exchange.status).to.equal(401);
    expect(exchange.complete).to.equal(true);
    expect(exchange.error).to.be.oneOf(['EPIPE', 'ECONNRESET']);
    expect(exchange.bytesWritten).to.be.below(MiB);
  });

  it('a keep-alive connection whose body was discarded serves the next request', async () => {
    const answers = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1');
        let received = '';
        socket.on('data', (data) => {
          received += data.toString('latin1');
          if ((received.match(/HTTP\/1\.1 /g) ?? []).length === 2 && received.endsWith('}')) socket.end();
        });
        socket.on('error', reject);
        socket.on('close', () => resolve(received));
        const body = Buffer.alloc(2 * MiB, 0x20);
        socket.write(head('GET /api/v1/conversations HTTP/1.1', { 'Content-Type': 'application/json', 'Content-Length': body.length }));
        socket.write(body);
        socket.write(head('GET /healthz HTTP/1.1', {}));
    });
    expect([...answers.matchAll(/HTTP\/1\.1 (\d+)/g)].map((m) => m[1])).to.deep.equal(['401', '200']);
  });
});
