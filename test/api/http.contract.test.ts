import { randomUUID } from 'node:crypto';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { expect } from 'chai';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import Koa from 'koa';
import { ResponseContract, checkResponses, describeViolation, type ContractViolation } from '../../src/api/response-contract.ts';
import { loadSpec } from '../../src/api/openapi.ts';
import { createApp } from '../../src/app.ts';
import { createHttpServer } from '../../src/http-server.ts';
import { createLogger } from '../../src/logger.ts';
import { requestContext } from '../../src/observability/request-context.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture } from '../helpers/fixtures.ts';
import { testConfig, testDatabase } from '../helpers/hooks.ts';
import { serverOutputReader, takeViolations } from '../helpers/response-contract.ts';
import { specOperations } from '../helpers/spec-operations.ts';
import { postEvents } from '../helpers/webhook.ts';

/**
 * The contract is exact (issue 19): every response is one `spec/openapi.yaml` describes, and the
 * findings of the black-box review, each reproduced here.
 */

const json = (value: unknown) => Buffer.from(JSON.stringify(value));

describe('response validation against spec/openapi.yaml', () => {
  const contract = new ResponseContract();

  it('names the operation, the status and the problem of an undocumented status', () => {
    const [violation] = contract.check({ method: 'GET', path: '/healthz', status: 500, headers: { 'content-type': 'application/json' }, body: json({ detail: 'x' }) });
    expect(describeViolation(violation!)).to.equal('GET /healthz (getHealth) answered 500: status 500 is not documented (documented: 200, 422, 429)');
  });

  it('refuses a body the status does not describe, with the schema error', () => {
    const [violation] = contract.check({
      method: 'GET',
      path: '/api/admin/verified-models',
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: json({ items: [], total: 0, limit: 50, offset: null }),
    });
    expect(violation?.operation).to.equal('listVerifiedModels');
    expect(violation?.problem).to.match(/\/offset must be integer/);
  });

  it('refuses a Content-Type the status does not document, and a body where it documents none', () => {
    expect(contract.check({ method: 'GET', path: '/healthz', status: 200, headers: { 'content-type': 'text/plain' }, body: Buffer.from('ok') })[0]?.problem).to.match(
      /Content-Type text\/plain is not documented/,
    );
    const redirect = contract.check({
      method: 'POST',
      path: `/billing/checkout/${randomUUID()}/confirm`,
      status: 303,
      headers: { location: '/billing/checkout/x', 'content-type': 'text/plain' },
      body: Buffer.from('Redirecting to /billing/checkout/x.'),
    });
    expect(redirect[0]?.problem).to.equal('a body was sent but 303 documents none');
  });

  it('refuses a response without a header the spec requires', () => {
    const [violation] = contract.check({ method: 'POST', path: `/billing/checkout/${randomUUID()}/cancel`, status: 303, headers: {}, body: Buffer.alloc(0) });
    expect(violation?.problem).to.equal('header Location is required for 303 but missing');
  });

  it('accepts what the spec describes, including a 4XX through a shared response', () => {
    expect(contract.check({ method: 'GET', path: '/healthz', status: 200, headers: { 'content-type': 'application/json' }, body: json({ status: 'ok' }) })).to.deep.equal([]);
    expect(
      contract.check({ method: 'GET', path: `/api/v1/conversations/${randomUUID()}`, status: 404, headers: { 'content-type': 'application/json; charset=utf-8' }, body: json({ detail: 'No such conversation' }) }),
    ).to.deep.equal([]);
  });

  it('checks what an app sends, and reports each violation', async () => {
    const reported: ContractViolation[] = [];
    const app = new Koa();
    app.use(checkResponses(contract, (v) => reported.push(v)));
    app.use((ctx) => {
      ctx.status = 418;
      ctx.body = { detail: 'teapot' };
    });
    const server = (await import('node:http')).createServer(app.callback());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const response = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/readyz`);
      await response.text();
      await new Promise((resolve) => setTimeout(resolve, 20));
    } finally {
      server.close();
    }
    expect(reported.map(describeViolation)).to.deep.equal(['GET /readyz (getReadiness) answered 418: status 418 is not documented (documented: 200, 422, 429, 503)']);
  });

  it('an app built for a test reports its violations to the harness (RESPONSE_VALIDATION=log), which fails the test', async () => {
    expect(testConfig().responseValidation).to.equal('log');
    const database = testDatabase();
    const { app } = await createApp({
      config: testConfig(),
      logger: createLogger('silent'),
      orm: database.orm,
      // /readyz answers 503 when unreachable (documented); a throwing probe becomes an undocumented 500.
      database: { isReachable: () => Promise.reject(new Error('probe exploded')) },
    });
    const server = createHttpServer(app, testConfig());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const response = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/readyz`);
      await response.text();
      await new Promise((resolve) => setTimeout(resolve, 20));
    } finally {
      server.close();
    }
    const found = takeViolations();
    expect(found.map((v) => `${v.operation} ${v.status}`)).to.deep.equal(['getReadiness 500']);
  });

  it("reads a server process's violation lines from its stderr, also when split across chunks", () => {
    const read = serverOutputReader();
    const line = `RESPONSE CONTRACT VIOLATION ${JSON.stringify({ operation: 'getHealth', method: 'GET', path: '/healthz', status: 500, problem: 'status 500 is not documented' })}\n`;
    read('{"level":30,"msg":"request"}\n' + line.slice(0, 20));
    read(line.slice(20));
    expect(takeViolations().map(describeViolation)).to.deep.equal(['GET /healthz (getHealth) answered 500: status 500 is not documented']);
  });
});

describe('the spec documents every status the server gives', () => {
  const spec = loadSpec() as unknown as { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> };
  for (const op of specOperations()) {
    it(`${op.operationId} documents 422${op.hasBody ? ', 413 and 415' : ''}`, () => {
      const statuses = Object.keys(spec.paths[op.path]![op.method.toLowerCase()]!.responses);
      // Unknown query parameters and malformed parameters are a 422 on every operation; a body can be too large or not JSON.
      expect(statuses).to.include('422');
      if (op.hasBody) expect(statuses).to.include.members(['413', '415']);
    });
  }
});

describe('POST /api/v1/webhooks/events/{conversation_id}: the conversation id as the spec describes it', () => {
  it('a standard validator (no formats of ours) accepts the dashed and the 32-hex form, as the server does', () => {
    const spec = loadSpec() as unknown as { components: { schemas: Record<string, object> } };
    const ajv = new Ajv2020({ strict: false });
    addFormatsModule.default(ajv);
    const validate = ajv.compile(spec.components.schemas.ConversationId!);
    const id = randomUUID();
    expect(validate(id)).to.equal(true);
    expect(validate(id.replace(/-/g, ''))).to.equal(true);
    expect(validate(id.toUpperCase().replace(/-/g, ''))).to.equal(true);
    expect(validate('not-a-uuid')).to.equal(false);
    expect(validate(`${id}0`)).to.equal(false);
  });

  it('the path parameter of the webhook is that schema, not format: uuid', () => {
    const webhook = specOperations().find((op) => op.operationId === 'ingestEvents')!;
    const parameter = webhook.parameters.find((p) => p.name === 'conversation_id')!;
    expect(parameter.schema).to.not.have.property('format');
  });
});

describe('malformed JSON → 422 json_invalid naming the position, never the text', () => {
  let app: TestApp;
  before(async () => {
    app = await createTestApp();
  });

  it('does not echo a secret that stands next to the syntax error', async () => {
    const user = await createUserFixture();
    const body = '{"svc_acc_api_key":x"ATATT_TOPSECRET_1234"}';
    const response = await app.request
      .post('/integration/issuetracker/workspaces')
      .set('X-Access-Token', user.accessToken)
      .set('Content-Type', 'application/json')
      .send(body)
      .expect(422);
    expect(response.text).to.not.include('ATATT').and.not.include('svc_acc_api_key');
    expect(response.body.detail).to.deep.equal([
      { loc: ['body', 19], msg: 'JSON decode error', type: 'json_invalid', input: {}, ctx: { error: 'Unexpected token at position 19' } },
    ]);
  });
});

describe('numbers read back as sent', () => {
  let app: TestApp;
  before(async () => {
    app = await createTestApp();
  });

  it('an untyped 120.0, 1.50, 1e2 and -0 in an event read back as written (not 120, 1.5, 100, 0)', async () => {
    const user = await createUserFixture();
    const conversationId = randomUUID();
    const text = JSON.stringify([minimalEvent('ActionEvent')]).replace('"timeout":null', '"timeout":120.0,"ratio":1.50,"scale":1e2,"zero":-0');
    expect(text).to.include('"timeout":120.0');
    await postEvents(app, user.sessionApiKey, conversationId, text).expect(200);
    const read = await app.request.get(`/api/v1/conversations/${conversationId}/events`).set('X-Access-Token', user.accessToken).expect(200);
    expect(read.text).to.include('"timeout":120.0,"ratio":1.50,"scale":1e2,"zero":-0');
  });
});

describe('errors in log lines: type, code, message and request id; no stack, no SQL, no body', () => {
  async function databaseError(secret: string): Promise<unknown> {
    try {
      await testDatabase().orm.em.getConnection().execute('select ?::json as payload', [`{"svc_acc_api_key": x"${secret}"}`]);
    } catch (error) {
      return error;
    }
    throw new Error('the statement did not fail');
  }

  function logLines(level: string, write: (log: ReturnType<typeof createLogger>) => void): Record<string, unknown>[] {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _encoding, callback) {
        lines.push(String(chunk));
        callback();
      },
    });
    write(createLogger(level, sink));
    return lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  }

  it('a database error is logged by its type and SQLSTATE with the request id, without the statement, its values or a stack', async () => {
    const error = await databaseError('ATATT_TOPSECRET_1234');
    const [line] = logLines('info', (log) => requestContext.run({ requestId: 'req-42' }, () => log.error({ err: error }, 'unhandled error')));
    const text = JSON.stringify(line);
    expect(line!.requestId).to.equal('req-42');
    expect(line!.err).to.deep.include({ code: '22P02' });
    expect((line!.err as { type: string }).type).to.be.a('string').and.not.equal('');
    expect(text).to.not.include('ATATT').and.not.match(/select/i).and.not.match(/\bat \S+ \(/).and.not.include('node_modules');
  });

  it('any other error is logged by type and message without its stack; LOG_LEVEL=debug adds only the frames', () => {
    const error = new TypeError('Cannot read properties of undefined');
    const [info] = logLines('info', (log) => log.error({ err: error }, 'unhandled error'));
    expect(info!.err).to.deep.equal({ type: 'TypeError', message: 'Cannot read properties of undefined' });
    const [debug] = logLines('debug', (log) => log.error({ err: error }, 'unhandled error'));
    const frames = (debug!.err as { frames: string[] }).frames;
    expect(frames.length).to.be.greaterThan(0);
    expect(frames.every((frame) => frame.startsWith('at '))).to.equal(true);
    expect(frames.join('\n')).to.include('test/api/http.contract.test.ts').and.not.include(process.cwd());
  });
});

describe("requests Node's HTTP parser refuses → the contract's JSON error body", () => {
  let port: number;
  let close: () => void;

  before(async () => {
    const { app } = await createApp({ config: testConfig(), logger: createLogger('silent'), orm: testDatabase().orm, database: testDatabase() });
    const server = createHttpServer(app, testConfig());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
    close = () => server.close();
  });
  after(() => close());

  /** Sends raw bytes and returns the raw response. */
  function raw(request: Buffer | string): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1');
      let response = '';
      socket.on('data', (chunk) => (response += chunk.toString('latin1')));
      socket.on('end', () => resolve(response));
      socket.on('error', reject);
      socket.end(request);
    });
  }

  for (const [what, request, status] of [
    ['a header block over 16 KB', `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431],
    ['Content-Length: abc', 'POST /api/admin/verified-models HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n', 400],
    ['a control character in a header', 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Bad: a\u0001b\r\n\r\n', 400],
    ['raw non-ASCII bytes in the path', Buffer.concat([Buffer.from('GET /h'), Buffer.from([0xc3, 0xa9]), Buffer.from(' HTTP/1.1\r\nHost: x\r\n\r\n')]), 400],
  ] as const) {
    it(`${what} → ${status} with {"detail": …} as application/json`, async () => {
      const response = await raw(request);
      const [head, body] = response.split('\r\n\r\n');
      expect(head).to.match(new RegExp(`^HTTP/1.1 ${status} `));
      expect(head).to.match(/\r\nContent-Type: application\/json\r\n/i);
      expect(JSON.parse(body!)).to.have.all.keys('detail').and.to.satisfy((b: { detail: unknown }) => typeof b.detail === 'string');
    });
  }
});
