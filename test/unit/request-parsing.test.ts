import { expect } from 'chai';
import { OpenAPIBackend } from 'openapi-backend';
import { createAjv } from '../../src/api/ajv.ts';
import { FastRouter, FastValidator, createOpenApiBackend, loadSpec } from '../../src/api/openapi.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { webhookPath } from '../helpers/webhook.ts';

/** The lean request parsing and validation (src/api/openapi.ts) must give what openapi-backend's own code gives. */
describe('request parsing and validation', () => {
  it("routes as openapi-backend's own router, found, 404 or 405, for every operation's path", async function () {
    this.timeout(30_000);
    const lean = await createOpenApiBackend();
    expect(lean.router).to.be.instanceOf(FastRouter);
    expect(lean.validator).to.be.instanceOf(FastValidator);
    const reference = new OpenAPIBackend({ definition: loadSpec(), quick: true });
    await reference.init();
    const outcome = (route: () => unknown) => {
      try {
        return (route() as { operationId?: string } | undefined)?.operationId ?? 'none';
      } catch (error) {
        return (error as Error).message;
      }
    };
    const paths = lean.router.getOperations().flatMap((operation) => {
      const path = operation.path.replace(/\{[^}]+\}/g, '0b8a4a2e-8d5e-4d8f-9c1f-3f1f0e0c9a11');
      return [path, `${path}/`, `${path}/extra`];
    });
    const seen = new Set<string>();
    for (const path of [...paths, '/no/such/path']) {
      for (const method of ['GET', 'POST', 'DELETE']) {
        const request = { method, path, headers: {} };
        for (const strict of [false, true]) {
          const expected = outcome(() => reference.router.matchOperation(request, strict));
          expect(outcome(() => lean.router.matchOperation(request, strict)), `${method} ${path}`).to.equal(expected);
          seen.add(expected.split(':')[0]!);
        }
      }
    }
    // Found, not found and method not allowed were all compared.
    expect(seen).to.include.members(['none', '404-notFound', '405-methodNotAllowed']);
    expect(seen.size).to.be.greaterThan(10);
  });

  it("gives the same parsed request as openapi-backend's own parser, for every operation", async function () {
    this.timeout(30_000);
    const lean = await createOpenApiBackend();
    const reference = new OpenAPIBackend({ definition: loadSpec(), quick: true, coerceTypes: true, customizeAjv: () => createAjv({ coerceTypes: true, useDefaults: true }) });
    await reference.init();
    const requests = lean.router.getOperations().flatMap((operation) => {
      const path = operation.path.replace(/\{[^}]+\}/g, (name) => (name.includes('id') ? '0b8a4a2e-8d5e-4d8f-9c1f-3f1f0e0c9a11' : 'a%20b'));
      const base = { method: operation.method.toUpperCase(), path, headers: { 'content-type': 'application/json', 'X-Mixed-Case': 'v' } };
      return [
        { request: { ...base }, operation },
        { request: { ...base, query: '', body: [{ kind: 'PauseEvent' }] }, operation },
        { request: { ...base, query: 'limit=5' }, operation },
        { request: { ...base, path: `${path}/` }, operation },
        { request: { ...base, headers: { ...base.headers, cookie: 'a=b' } }, operation },
        { request: { ...base }, operation: undefined },
      ];
    });
    expect(requests.length).to.be.greaterThan(6);
    for (const { request, operation } of requests) {
      const expected = reference.router.parseRequest(structuredClone(request), operation);
      const actual = lean.router.parseRequest(structuredClone(request), operation);
      expect(actual, JSON.stringify(request)).to.deep.equal(expected);
    }
  });

  it("gives the same validation result as openapi-backend's own validation, valid or not", async function () {
    this.timeout(30_000);
    const lean = await createOpenApiBackend();
    const reference = new OpenAPIBackend({ definition: loadSpec(), quick: true, coerceTypes: true, customizeAjv: () => createAjv({ coerceTypes: true, useDefaults: true }) });
    await reference.init();
    const operation = lean.router.getOperation('ingestEvents')!;
    const path = webhookPath('0b8a4a2e-8d5e-4d8f-9c1f-3f1f0e0c9a11');
    const headers = { 'content-type': 'application/json', 'x-session-api-key': 'k' };
    const bodies = [
      [minimalEvent('MessageEvent'), minimalEvent('ActionEvent'), minimalEvent('PauseEvent')],
      [minimalEvent('MessageEvent'), { kind: 'MessageEvent', source: 'nobody' }, { kind: 'NoSuchEvent' }],
      [],
      { not: 'an array' },
      undefined,
    ];
    const requests = [
      ...bodies.map((body) => ({ method: 'post', path, headers, body })),
      { method: 'post', path: webhookPath('not-a-uuid'), headers, body: bodies[0] },
      { method: 'post', path, headers: { 'x-session-api-key': 'k' }, body: bodies[0] },
    ];
    for (const request of requests) {
      const expected = reference.validator.validateRequest(structuredClone(request), operation);
      const actual = lean.validator.validateRequest(structuredClone(request), operation);
      expect(actual, JSON.stringify(request)).to.deep.equal(expected);
    }
    // Both kinds of outcome were compared.
    const outcomes = requests.map((request) => lean.validator.validateRequest(structuredClone(request), operation).valid);
    expect(outcomes).to.include(true).and.to.include(false);
  });
});
