import { expect } from 'chai';
import { OpenAPIBackend } from 'openapi-backend';
import { createOpenApiBackend, loadSpec } from '../src/api/openapi.ts';

/** The lean request parser (src/api/openapi.ts) must give what openapi-backend's own parser gives. */
describe('request parsing', () => {
  it("gives the same parsed request as openapi-backend's own parser, for every operation", async function () {
    this.timeout(30_000);
    const lean = await createOpenApiBackend();
    const reference = new OpenAPIBackend({ definition: loadSpec(), quick: true });
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
});
