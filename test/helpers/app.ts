import type { Server } from 'node:http';
import { Writable } from 'node:stream';
import supertest from 'supertest';
import type { Config } from '../../src/config.ts';
import { createApp, type App } from '../../src/app.ts';
import { createLogger } from '../../src/logger.ts';
import { testConfig, testDatabase } from './hooks.ts';
import { captureLog } from './secret-scan.ts';
import { freePort } from '../../scripts/lib/free-port.ts';

/** Every rate limit off, for a test that sends far more requests from one credential than a person does (a fuzz). */
export const RATE_LIMITS_OFF: Config['rateLimits'] = { reads: undefined, writes: undefined, streams: undefined, admin: undefined, webhook: undefined };

/** A test app on the shared test database, and every line it logged. */
export interface TestApp {
  request: ReturnType<typeof supertest>;
  logs: string[];
}

/**
 * Builds the app as `main.ts` does, with a logger the test can read. Building it compiles the
 * contract's validators (about a second), so build one per `describe`, not one per test.
 */
export async function createTestApp(
  overrides: Partial<Config> = {},
  databaseOverride?: { isReachable(): Promise<boolean> },
): Promise<TestApp> {
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, callback) {
      logs.push(String(chunk));
      captureLog('app', String(chunk));
      callback();
    },
  });
  const database = testDatabase();
  const { app } = await createApp({
    config: { ...testConfig(), ...overrides },
    logger: createLogger('debug', sink),
    orm: database.orm,
    database: databaseOverride ?? database,
  });
  return { request: supertest(app.callback()), logs };
}

/** The app listening on a free loopback port with the local checkout (for browsers); `close` stops it. */
export async function listenTestApp(overrides: Partial<Config> = {}): Promise<{ liveStreams: App['liveStreams']; baseUrl: string; close(): Promise<void> }> {
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const database = testDatabase();
  const { app, liveStreams } = await createApp({
    config: { ...testConfig(), billing: { ...testConfig().billing, provider: 'local', publicBaseUrl: baseUrl }, ...overrides },
    logger: createLogger('silent'),
    orm: database.orm,
    database,
  });
  const server: Server = app.listen(port, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return { liveStreams, baseUrl, close: () => new Promise((resolve) => server.close(() => resolve())) };
}
