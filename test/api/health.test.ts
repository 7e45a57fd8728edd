import { expect } from 'chai';
import { createTestApp, type TestApp } from '../helpers/app.ts';

describe('GET /healthz and GET /readyz', () => {
  let client: TestApp;
  before(async () => {
    client = await createTestApp();
  });

  it('/healthz returns 200 {status: ok} while the process is up', async () => {
    const response = await client.request.get('/healthz').expect(200);
    expect(response.body).to.deep.equal({ status: 'ok' });
  });

  it('/readyz returns 200 {status: ok} when the database answers', async () => {
    const response = await client.request.get('/readyz').expect(200);
    expect(response.body).to.deep.equal({ status: 'ok' });
  });

  it('/readyz returns 503 {status: unavailable} when the database does not answer', async () => {
    const unreachable = await createTestApp({}, { isReachable: async () => false });
    const response = await unreachable.request.get('/readyz').expect(503);
    expect(response.body).to.deep.equal({ status: 'unavailable' });
  });
});
