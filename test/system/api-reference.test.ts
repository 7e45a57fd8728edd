import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { expect } from 'chai';
import type { Browser } from 'playwright-core';
import { parse } from 'yaml';
import { createApp } from '../../src/app.ts';
import { createLogger } from '../../src/logger.ts';
import { SPEC_PATH } from '../../src/package-root.ts';
import { REDOC_BUNDLE_PATH } from '../../src/observability/api-reference.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { launchBrowserOrSkip } from '../helpers/browser.ts';
import { ROOT } from '../helpers/server-process.ts';
import { testConfig, testDatabase } from '../helpers/hooks.ts';

interface SpecOperation {
  operationId: string;
  summary: string;
  tag: string;
}

/** Every operation the spec file declares, read from the file itself. */
function specOperations(): SpecOperation[] {
  const spec = parse(fs.readFileSync(SPEC_PATH, 'utf8')) as {
    paths: Record<string, Record<string, { operationId: string; summary: string; tags: string[] }>>;
  };
  return Object.values(spec.paths).flatMap((item) =>
    Object.entries(item)
      .filter(([method]) => ['get', 'put', 'post', 'delete', 'patch', 'options', 'head', 'trace'].includes(method))
      .map(([, operation]) => ({ operationId: operation.operationId, summary: operation.summary, tag: operation.tags[0]! })),
  );
}

describe('GET /openapi.yaml and GET /docs', () => {
  let client: TestApp;
  before(async () => {
    client = await createTestApp();
  });

  it('serves the spec exactly as the file in the repository, without credentials', async () => {
    const response = await client.request.get('/openapi.yaml').expect(200);
    expect(response.headers['content-type']).to.match(/^application\/yaml/);
    expect(response.text).to.equal(fs.readFileSync(`${ROOT}/spec/openapi.yaml`, 'utf8'));
  });

  it('serves a page that loads Redoc from this server (not a CDN) and allows no other origin', async () => {
    const page = await client.request.get('/docs').expect(200);
    expect(page.headers['content-type']).to.match(/^text\/html/);
    expect(page.text).to.include('src="docs/redoc.standalone.js"').and.include('spec-url="openapi.yaml"');
    expect(page.text).not.to.match(/https?:\/\//);
    expect(page.headers['content-security-policy']).to.include("script-src 'self'").and.include("default-src 'none'");
    const script = await client.request.get('/docs/redoc.standalone.js').expect(200);
    expect(script.headers['content-type']).to.match(/^text\/javascript/);
    expect(script.text === fs.readFileSync(REDOC_BUNDLE_PATH, 'utf8'), 'the bundle of the redoc package').to.equal(true);
  });
});

describe('GET /docs in headless Chromium', function () {
  this.timeout(90_000);
  let browser: Browser | undefined;
  let server: Server | undefined;
  let baseUrl: string;

  before(async function () {
    browser = await launchBrowserOrSkip(this);
    const { app } = await createApp({
      config: testConfig(),
      logger: createLogger('silent'),
      orm: testDatabase().orm,
      database: testDatabase(),
    });
    server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server!.once('listening', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    await browser?.close();
    if (server) await new Promise((resolve) => server!.close(resolve));
  });

  it('renders every operation of the spec (by operationId and summary) with no network beyond this server', async () => {
    const page = await browser!.newPage({ viewport: { width: 1400, height: 1000 } });
    // The machine may be offline: anything outside this origin is refused, as a closed network would.
    const foreign: string[] = [];
    await page.route('**/*', (route) => {
      const url = route.request().url();
      if (url.startsWith(`${baseUrl}/`)) return route.continue();
      foreign.push(url);
      return route.abort();
    });
    const pageErrors: string[] = [];
    page.on('pageerror', (error) => pageErrors.push(error.message));

    await page.goto(`${baseUrl}/docs`);
    await page.waitForSelector('[data-section-id^="tag/"]', { timeout: 60_000 });

    const operations = specOperations();
    expect(operations.length).to.be.greaterThan(10);
    const rendered = await page.$$eval('[data-section-id]', (elements) => elements.map((e) => e.getAttribute('data-section-id')));
    const menu = await page.$$eval('[data-item-id]', (elements) =>
      Object.fromEntries(elements.map((e) => [e.getAttribute('data-item-id'), e.textContent ?? ''])),
    );
    for (const { operationId, summary, tag } of operations) {
      const id = `tag/${tag}/operation/${operationId}`;
      expect(rendered, operationId).to.include(id);
      expect(menu[id], `menu entry of ${operationId}`).to.include(summary);
    }
    // The operation's own section shows its summary as a heading.
    const heading = await page.locator('[data-section-id="operation/ingestEvents"] h2').first().textContent();
    expect(heading).to.include(operations.find((o) => o.operationId === 'ingestEvents')!.summary);
    expect(pageErrors).to.deep.equal([]);
    // Only Redoc's optional "by Redocly" logo points elsewhere (and the page's CSP refuses it anyway).
    expect(foreign.filter((url) => !url.startsWith('blob:') && !url.includes('cdn.redoc.ly/redoc/logo'))).to.deep.equal([]);
    await page.close();
  });
});
