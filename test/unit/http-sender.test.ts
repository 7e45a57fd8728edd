import http from 'node:http';
import { expect } from 'chai';
import { freePort } from '../../scripts/lib/free-port.ts';
import { MAX_RESPONSE_BYTES, post } from '../../src/outbound/http-sender.ts';

const LOOPBACK = { address: '127.0.0.1', family: 4 } as const;

/** A receiver whose answer each test sets; it records what arrived. */
class TestReceiver {
  readonly server: http.Server;
  port = 0;
  answer: (request: http.IncomingMessage, response: http.ServerResponse) => void = (_request, response) => response.writeHead(204).end();
  arrived: { headers: http.IncomingHttpHeaders; url: string; body: string }[] = [];

  constructor() {
    this.server = http.createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        this.arrived.push({ headers: request.headers, url: request.url!, body: Buffer.concat(chunks).toString('utf8') });
        this.answer(request, response);
      });
    });
  }

  async start(): Promise<this> {
    this.port = await freePort();
    await new Promise<void>((resolve) => this.server.listen(this.port, '127.0.0.1', resolve));
    return this;
  }

  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

describe('the outbound HTTP sender', () => {
  let receiver: TestReceiver;

  beforeEach(async () => {
    receiver = await new TestReceiver().start();
  });

  afterEach(() => receiver.stop());

  it('connects to the checked address whatever the host name, and sends the body with its headers', async () => {
    const url = new URL(`http://receiver.invalid:${receiver.port}/hooks/a?b=1`);
    const headers = { 'webhook-id': 'msg_1', 'User-Agent': 'theirs/1', 'X-Team': 'blue' };
    const result = await post(url, LOOPBACK, headers, Buffer.from('{"a":1}'), 5_000);
    expect(result).to.include({ statusCode: 204, error: null, responseExcerpt: '' });
    const [arrived] = receiver.arrived;
    expect(arrived!.url).to.equal('/hooks/a?b=1');
    expect(arrived!.body).to.equal('{"a":1}');
    expect(arrived!.headers).to.include({
      host: `receiver.invalid:${receiver.port}`,
      'webhook-id': 'msg_1',
      'user-agent': 'theirs/1',
      'x-team': 'blue',
      'content-type': 'application/json',
      'content-length': '7',
    });
  });

  it('reports a failed answer with its excerpt and a 429\'s Retry-After', async () => {
    receiver.answer = (_request, response) => response.writeHead(429, { 'retry-after': '7' }).end('x'.repeat(5_000));
    const result = await post(new URL(`http://127.0.0.1:${receiver.port}/`), LOOPBACK, {}, '{}', 5_000);
    expect(result).to.include({ statusCode: 429, error: 'The receiver answered 429', retryAfterMs: 7_000 });
    expect(result.responseExcerpt).to.equal('x'.repeat(1024));
  });

  it('stops reading an endless answer at its limit, and the next attempt still goes out', async () => {
    receiver.answer = (_request, response) => {
      response.writeHead(200);
      const chunk = Buffer.alloc(16 * 1024, 'y');
      const more = () => {
        while (!response.destroyed && response.write(chunk));
        if (!response.destroyed) response.once('drain', more);
      };
      more();
    };
    const url = new URL(`http://127.0.0.1:${receiver.port}/`);
    const result = await post(url, LOOPBACK, {}, '{}', 5_000);
    expect(result).to.include({ statusCode: 200, error: null });
    expect(result.responseExcerpt).to.have.length(1024);
    expect(MAX_RESPONSE_BYTES).to.be.greaterThan(1024);
    receiver.answer = (_request, response) => response.writeHead(200).end('ok');
    expect(await post(url, LOOPBACK, {}, '{}', 5_000)).to.include({ statusCode: 200, responseExcerpt: 'ok' });
  });

  it('gives up on a receiver that does not answer within the timeout', async () => {
    receiver.answer = () => undefined;
    const started = Date.now();
    const result = await post(new URL(`http://127.0.0.1:${receiver.port}/`), LOOPBACK, {}, '{}', 300);
    expect(result).to.include({ statusCode: null, error: 'No answer within 300 ms', responseExcerpt: null });
    expect(Date.now() - started).to.be.within(250, 3_000);
  });

  it('reports a refused connection by its code', async () => {
    const closed = await freePort();
    const result = await post(new URL(`http://127.0.0.1:${closed}/`), LOOPBACK, {}, '{}', 5_000);
    expect(result).to.include({ statusCode: null, error: 'Connection failed: ECONNREFUSED' });
  });

  it('reports a receiver that closes the connection without answering', async () => {
    receiver.answer = (request) => request.socket.destroy();
    const result = await post(new URL(`http://127.0.0.1:${receiver.port}/`), LOOPBACK, {}, '{}', 5_000);
    expect(result.statusCode).to.equal(null);
    expect(result.error).to.match(/^Connection failed: /);
  });
});
