import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Response } from 'supertest';
import { loadSpec } from '../../src/api/openapi.ts';
import { isSecretLookingKey } from '../../src/secret-keys.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';
import { credentialHeaders, fillPath, schemesOf, specOperations, TEST_METRICS_TOKEN, USER_SCHEMES, type SpecOperation } from '../helpers/spec-operations.ts';

type Node = Record<string, unknown>;

/**
 * The operations whose success responses carry a secret, read from the spec: a property anywhere in a
 * 2xx body schema whose name says secret (`secret`, `access_token`, `api_key`… as `src/secret-keys.ts`
 * decides) and that holds text, or a `ticket` (a credential for one live stream).
 */
function secretBearingOperations(): string[] {
  const spec = loadSpec() as unknown as Node;
  const resolve = (node: unknown): Node => {
    let current = node as Node;
    while (current && typeof current.$ref === 'string') current = (current.$ref as string).slice(2).split('/').reduce((n: Node, part) => n[part] as Node, spec);
    return current;
  };
  const carriesSecret = (schema: unknown, seen: Set<unknown>): boolean => {
    const node = resolve(schema);
    if (!node || typeof node !== 'object' || seen.has(node)) return false;
    seen.add(node);
    const properties = (node.properties ?? {}) as Record<string, unknown>;
    // A count such as `active_session_api_keys` is no secret (as `holdsSecret` decides for values).
    const holdsText = (property: unknown) => !['integer', 'number', 'boolean'].includes(resolve(property)?.type as string);
    if (Object.entries(properties).some(([name, property]) => (isSecretLookingKey(name) || name === 'ticket') && holdsText(property))) return true;
    const children = [...Object.values(properties), node.items, ...((node.allOf ?? []) as unknown[]), ...((node.oneOf ?? []) as unknown[]), ...((node.anyOf ?? []) as unknown[])];
    return children.some((child) => child !== undefined && carriesSecret(child, seen));
  };
  const found: string[] = [];
  for (const item of Object.values(spec.paths as Record<string, Node>)) {
    for (const operation of Object.values(item) as Node[]) {
      if (!operation || typeof operation !== 'object' || !operation.operationId) continue;
      const responses = (operation.responses ?? {}) as Record<string, unknown>;
      const success = Object.entries(responses).filter(([status]) => status.startsWith('2')).map(([, response]) => resolve(response));
      const schemas = success.flatMap((response) => Object.values((response.content ?? {}) as Record<string, Node>).map((media) => media.schema));
      if (schemas.some((schema) => schema !== undefined && carriesSecret(schema, new Set()))) found.push(operation.operationId as string);
    }
  }
  return found.sort();
}

/** Path parameter values that route (the resource need not exist: a 404 is still a response a credential opened). */
function pathValuesOf(operation: SpecOperation): Record<string, string> {
  const values: Record<string, string> = {};
  for (const parameter of operation.parameters.filter((p) => p.in === 'path')) {
    const type = parameter.schema?.type;
    values[parameter.name] = type === 'integer' ? '1' : parameter.name === 'workspace_name' ? 'acme' : randomUUID();
  }
  return values;
}

describe('caching: Cache-Control no-store on what a credential opened', function () {
  this.timeout(60_000);
  let client: TestApp;
  let admin: UserFixture;

  before(async () => {
    client = await createTestApp({ metricsToken: TEST_METRICS_TOKEN });
  });

  beforeEach(async () => {
    admin = await createUserFixture({ superAdmin: true });
  });

  it('every authenticated operation of the spec answers no-store, whatever its status', async () => {
    const authenticated = specOperations().filter((op) => schemesOf(op).length > 0);
    expect(authenticated.length).to.be.above(40);
    const problems: string[] = [];
    for (const operation of authenticated) {
      const scheme = schemesOf(operation).find((s) => USER_SCHEMES.includes(s) || s === 'MetricsToken');
      if (!scheme) {
        problems.push(`${operation.operationId}: no scheme this test can satisfy (${schemesOf(operation).join(', ')})`);
        continue;
      }
      // HEAD for reads: the same headers, and a live stream is checked without subscribing.
      const method = operation.method === 'GET' ? 'head' : (operation.method.toLowerCase() as 'post' | 'put' | 'patch' | 'delete');
      const request = client.request[method](fillPath(operation.path, pathValuesOf(operation))).set(credentialHeaders(scheme, admin));
      const response: Response = operation.hasBody ? await request.send((operation.bodyExample ?? {}) as object) : await request;
      if (response.status === 401) problems.push(`${operation.operationId}: 401 with a valid ${scheme}`);
      else if (response.headers['cache-control'] !== 'no-store') problems.push(`${operation.operationId} answered ${response.status} with Cache-Control ${response.headers['cache-control']}`);
    }
    expect(problems).to.deep.equal([]);
  });

  it('every operation whose response carries a secret (from the spec) answers its success no-store', async () => {
    const secretBearing = secretBearingOperations();
    expect(secretBearing).to.include.members(['createKey', 'createUserKey', 'createWebhookEndpoint', 'rotateWebhookEndpointSecret', 'createStreamTicket']);
    const as = (method: 'get' | 'post', path: string, body?: object) => {
      const request = client.request[method](path).set('X-Access-Token', admin.accessToken);
      return body ? request.send(body) : request;
    };
    /** How to make each one succeed; a secret-bearing operation missing here fails the test. */
    const successes: Record<string, () => Promise<Response>> = {
      createKey: () => as('post', '/api/keys', { kind: 'access_token', name: 'cli' }),
      createUserKey: async () => as('post', `/api/admin/users/${admin.userId}/keys`, { kind: 'session_api_key', name: 'agent' }),
      createWebhookEndpoint: () => as('post', '/api/v1/webhook-endpoints', { url: 'https://hooks.example.com/agents' }),
      rotateWebhookEndpointSecret: async () => {
        const endpoint = await as('post', '/api/v1/webhook-endpoints', { url: 'https://hooks.example.com/rotate' });
        return as('post', `/api/v1/webhook-endpoints/${endpoint.body.id}/rotate-secret`, {});
      },
      createInvitation: async () => {
        const org = await as('post', '/api/orgs', { name: 'Caching' });
        return as('post', `/api/orgs/${org.body.id}/invitations`, { email: `invited-${randomUUID()}@example.com`, role: 'member' });
      },
      createStreamTicket: async () => {
        const conversationId = randomUUID();
        await client.request.post(`/api/v1/webhooks/events/${conversationId}`).set('X-Session-API-Key', admin.sessionApiKey).send([{ kind: 'PauseEvent' }]).expect(200);
        return as('post', `/api/v1/conversations/${conversationId}/events/stream-tickets`);
      },
    };
    for (const operationId of secretBearing) {
      const succeed = successes[operationId];
      expect(succeed, `${operationId} carries a secret: add how it succeeds to this test`).to.be.a('function');
      const response = await succeed!();
      expect(response.status, `${operationId}: ${response.text}`).to.be.within(200, 299);
      for (const field of ['secret', 'ticket', 'token']) if (typeof response.body[field] === 'string') rememberSecret(response.body[field]);
      expect(response.headers['cache-control'], operationId).to.equal('no-store');
    }
  });
});

describe('caching: ETag and If-None-Match on the console, the API reference and the spec', function () {
  this.timeout(30_000);
  let client: TestApp;

  before(async () => {
    client = await createTestApp();
  });

  for (const path of ['/', '/docs', '/openapi.yaml', '/docs/redoc.standalone.js']) {
    it(`GET ${path}: an ETag, then 304 without a body for If-None-Match naming it (GET and HEAD)`, async () => {
      const first = await client.request.get(path).expect(200);
      const etag = first.headers.etag as string;
      expect(etag).to.match(/^"[A-Za-z0-9_-]{22}"$/);
      expect(first.headers['cache-control']).to.be.oneOf(['no-cache', 'public, max-age=3600']);
      const again = await client.request.get(path).set('If-None-Match', etag).expect(304);
      expect(again.text ?? '').to.equal('');
      expect(again.headers.etag).to.equal(etag);
      await client.request.head(path).set('If-None-Match', `W/${etag}, "other"`).expect(304);
      await client.request.get(path).set('If-None-Match', '"stale"').expect(200);
    });
  }

  it('the console links its assets by content hash: cached for a year (immutable) under it, revalidated without it', async () => {
    const page = await client.request.get('/').expect(200);
    const links = [...page.text.matchAll(/(?:href|src)="(console\/console\.(?:js|css)\?v=([A-Za-z0-9_-]+))"/g)];
    expect(links).to.have.length(2);
    for (const [, link, hash] of links) {
      const hashed = await client.request.get(`/${link}`).expect(200);
      expect(hashed.headers['cache-control']).to.equal('public, max-age=31536000, immutable');
      expect(hashed.headers.etag).to.equal(`"${hash}"`);
      const plain = await client.request.get(`/${link!.split('?')[0]}`).expect(200);
      expect(plain.headers['cache-control']).to.equal('no-cache');
      await client.request.get(`/${link!.split('?')[0]}`).set('If-None-Match', `"${hash}"`).expect(304);
      // An old page's link (another hash) still gets the asset, but not for a year.
      const old = await client.request.get(`/${link!.split('?')[0]}?v=0ldbuild`).expect(200);
      expect(old.headers['cache-control']).to.equal('no-cache');
    }
  });
});
