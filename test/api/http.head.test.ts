import { randomUUID } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { expect } from 'chai';
import supertest from 'supertest';
import { createApp } from '../../src/app.ts';
import { createLogger } from '../../src/logger.ts';
import { testConfig, testDatabase } from '../helpers/hooks.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import {
  credentialHeaders,
  fillPath,
  schemesOf,
  specOperations,
  TEST_METRICS_TOKEN,
  type SpecOperation,
  type SpecParameter,
} from '../helpers/spec-operations.ts';
import { postEvents } from '../helpers/webhook.ts';

/**
 * HEAD on every GET operation of the contract answers as the GET without a body: the same status and
 * headers, `Content-Length` as the GET sends it (or none where the GET streams). The operations come
 * from `spec/openapi.yaml`, so a GET operation added to the spec is covered here without touching
 * this file; its path parameters get a value from `PATH_VALUES` (then its GET must succeed), or one
 * made from the parameter's schema (then HEAD must only answer as GET does, 404 or not).
 */
const getOperations = specOperations().filter((op) => op.method === 'GET');

/** Headers that differ between any two responses. */
const PER_RESPONSE_HEADERS = new Set(['date', 'x-request-id', 'transfer-encoding', 'content-length']);
/** Hop-by-hop headers: the raw HEAD asks for `Connection: close`, the GETs keep the connection alive. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive']);

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  /** Everything the server sent after the header block, until it closed the connection. */
  rest: Buffer;
}

/** Sends one request over a raw socket (`Connection: close`) and returns exactly what came back. */
function rawRequest(port: number, method: string, path: string, headers: Record<string, string>): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.setTimeout(10_000, () => socket.destroy(new Error(`${method} ${path}: no end within 10 s`)));
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const all = Buffer.concat(chunks);
      const end = all.indexOf('\r\n\r\n');
      if (end < 0) return reject(new Error(`${method} ${path}: no complete header block: ${all.toString().slice(0, 200)}`));
      const [statusLine, ...lines] = all.subarray(0, end).toString('latin1').split('\r\n');
      const parsed: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        parsed[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      resolve({ status: Number(statusLine!.split(' ')[1]), headers: parsed, rest: all.subarray(end + 4) });
    });
    const head = Object.entries({ Host: `127.0.0.1:${port}`, Connection: 'close', ...headers })
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('');
    socket.write(`${method} ${path} HTTP/1.1\r\n${head}\r\n`);
  });
}

/** A GET through fetch: status, headers and the body's length (a stream is cut off after its headers). */
async function get(port: number, path: string, headers: Record<string, string>) {
  const controller = new AbortController();
  // A redirect is compared as the redirect itself, as HEAD answers it.
  const response = await fetch(`http://127.0.0.1:${port}${path}`, { headers, signal: controller.signal, redirect: 'manual' });
  const live = (response.headers.get('content-type') ?? '').startsWith('text/event-stream');
  let bodyLength: number | undefined;
  if (live) controller.abort();
  else bodyLength = (await response.arrayBuffer()).byteLength;
  // A body streamed without a length (the live stream, an NDJSON export) has no Content-Length to repeat.
  const streaming = live || response.headers.get('content-length') === null;
  return { status: response.status, headers: Object.fromEntries(response.headers), bodyLength, streaming };
}

/** A value for a path parameter the fixtures below do not provide, from its schema. */
function valueFromSchema(parameter: SpecParameter): string {
  const schema = parameter.schema ?? {};
  if (schema.example !== undefined) return String(schema.example);
  if (schema.format === 'uuid') return randomUUID();
  if (schema.type === 'integer' || schema.type === 'number') return '1';
  return 'unknown';
}

describe('HEAD on every GET operation', function () {
  this.timeout(60_000);

  let server: http.Server;
  let port: number;
  let admin: UserFixture;
  let request: ReturnType<typeof supertest>;
  /** Path parameter values that name something the super admin below owns, so every GET succeeds. */
  let PATH_VALUES: Record<string, string>;

  before(async () => {
    const { app } = await createApp({
      config: { ...testConfig(), metricsToken: TEST_METRICS_TOKEN },
      logger: createLogger('silent'),
      orm: testDatabase().orm,
      database: testDatabase(),
    });
    server = http.createServer(app.callback());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as net.AddressInfo).port;
    request = supertest(server);
  });

  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  // The root hook empties the tables before each test: the fixtures are made again for each.
  beforeEach(async () => {
    admin = await createUserFixture({ superAdmin: true });
    const conversationId = randomUUID();
    await postEvents(request, admin.sessionApiKey, conversationId, [{ kind: 'PauseEvent', source: 'user' }]).expect(200);
    const checkout = await request
      .post('/api/billing/create-checkout-session')
      .set('X-Access-Token', admin.accessToken)
      .send({ amount: 5 })
      .expect(200);
    await request
      .post('/integration/issuetracker/workspaces')
      .set('X-Access-Token', admin.accessToken)
      .send({
        workspace_name: 'head-test',
        webhook_secret: 'whsec_head_test_secret',
        svc_acc_email: 'bot@example.com',
        svc_acc_api_key: 'head-test-api-key',
        is_active: true,
      })
      .expect(201);
    PATH_VALUES = {
      conversation_id: conversationId,
      session_id: new URL(checkout.body.redirect_url as string).pathname.split('/').pop()!,
    };
  });

  /** The credential headers of the first security alternative the test can satisfy; none for public operations. */
  function headersFor(operation: SpecOperation): Record<string, string> {
    const schemes = schemesOf(operation).filter((scheme) => scheme !== 'StreamTicket');
    return schemes.length === 0 ? {} : credentialHeaders(schemes[0]!, { accessToken: admin.accessToken, sessionApiKey: admin.sessionApiKey });
  }

  it('covers the GET operations of the spec', () => {
    expect(getOperations.map((op) => op.operationId)).to.include.members(['getHealth', 'getConversation', 'streamConversationEvents', 'getMetrics']);
  });

  for (const operation of getOperations) {
    it(`HEAD ${operation.path} (${operation.operationId}) answers as its GET, without a body`, async () => {
      const pathParameters = operation.parameters.filter((p) => p.in === 'path');
      const known = pathParameters.every((p) => p.name in PATH_VALUES);
      const values = Object.fromEntries(pathParameters.map((p) => [p.name, PATH_VALUES[p.name] ?? valueFromSchema(p)]));
      // Required query parameters (the search's `q`) take their schema's example.
      const required = operation.parameters.filter((p) => p.in === 'query' && p.required);
      const query = required.map((p) => `${p.name}=${encodeURIComponent(valueFromSchema(p))}`).join('&');
      const path = fillPath(operation.path, values) + (query ? `?${query}` : '');
      const headers = headersFor(operation);

      const first = await get(port, path, headers);
      // Success, or a redirect (the old live page's address answers 302 to the console).
      if (known) expect(first.status, `GET ${path}`).to.be.within(200, 399);
      const head = await rawRequest(port, 'HEAD', path, headers);
      const second = await get(port, path, headers);

      expect(head.status).to.equal(first.status);
      expect(head.rest.length, `bytes after the header block: ${head.rest.toString().slice(0, 200)}`).to.equal(0);
      for (const [name, value] of Object.entries(first.headers)) {
        if (PER_RESPONSE_HEADERS.has(name) || HOP_BY_HOP.has(name)) continue;
        expect(head.headers[name], `header ${name}`).to.equal(value);
      }
      for (const name of Object.keys(head.headers)) {
        if (!PER_RESPONSE_HEADERS.has(name) && !HOP_BY_HOP.has(name)) expect(first.headers, `HEAD sent ${name}, GET did not`).to.have.property(name);
      }
      if (first.streaming) {
        expect(head.headers).not.to.have.property('content-length');
      } else if (first.bodyLength === second.bodyLength) {
        expect(Number(head.headers['content-length'])).to.equal(first.bodyLength);
      } else {
        // A body that changes from one request to the next (/metrics counts requests): a length, not the same one.
        expect(head.headers['content-length']).to.match(/^\d+$/);
      }
    });
  }

  it('HEAD without a credential answers 401 as GET does, without a body', async () => {
    const head = await rawRequest(port, 'HEAD', '/api/admin/super-admins', {});
    expect(head.status).to.equal(401);
    expect(head.headers['content-type']).to.match(/^application\/json/);
    expect(Number(head.headers['content-length'])).to.be.greaterThan(0);
    expect(head.rest.length).to.equal(0);
  });

  it('HEAD on a path without a GET operation answers 405 with Allow, and Allow names HEAD beside GET', async () => {
    const head = await rawRequest(port, 'HEAD', '/api/billing/create-checkout-session', {});
    expect(head.status).to.equal(405);
    expect(head.headers.allow).to.equal('POST');
    expect(head.rest.length).to.equal(0);
    const put = await request.put('/api/admin/verified-models').set('X-Access-Token', admin.accessToken).send({}).expect(405);
    expect(put.headers.allow!.split(', ')).to.have.members(['POST', 'GET', 'HEAD']);
  });

  it('HEAD on the live stream does not subscribe: the response ends at once', async () => {
    const started = Date.now();
    const head = await rawRequest(port, 'HEAD', `/api/v1/conversations/${PATH_VALUES.conversation_id}/events/stream`, {
      'X-Access-Token': admin.accessToken,
    });
    expect(head.status).to.equal(200);
    expect(head.headers['content-type']).to.equal('text/event-stream; charset=utf-8');
    expect(Date.now() - started).to.be.below(2_000);
  });

  it('HEAD on an unknown path answers 404 without a body', async () => {
    const head = await rawRequest(port, 'HEAD', '/no/such/path', {});
    expect(head.status).to.equal(404);
    expect(head.rest.length).to.equal(0);
  });
});
