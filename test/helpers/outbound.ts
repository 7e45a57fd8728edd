import http from 'node:http';
import type { AddressInfo } from 'node:net';
import supertest from 'supertest';
import { Webhook } from 'standardwebhooks';
import { createApp } from '../../src/app.ts';
import type { Config, OutboundWebhookConfig } from '../../src/config.ts';
import { createLogger } from '../../src/logger.ts';
import type { DeliveryWorker } from '../../src/outbound/delivery-worker.ts';
import { testConfig, testDatabase } from './hooks.ts';
import { waitFor } from './server-process.ts';

/** An answer of the receiver: a status, or a status with headers. */
export type ReceiverAnswer = number | { status: number; headers?: Record<string, string> };

/** A loopback receiver: records every request; answers with the next of `answers` (then 200). */
export class Receiver {
  readonly requests: { url: string; headers: http.IncomingHttpHeaders; body: string; at: number }[] = [];
  answers: ReceiverAnswer[] = [];
  /** The body of every answer. */
  answerBody = 'ok';
  /** Requests are held (never answered) while true. */
  hang = false;
  private server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      this.requests.push({ url: request.url ?? '', headers: request.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() });
      if (this.hang) return;
      const answer = this.answers.shift() ?? 200;
      const { status, headers } = typeof answer === 'number' ? { status: answer, headers: {} } : answer;
      response.statusCode = status;
      for (const [name, value] of Object.entries(headers ?? {})) response.setHeader(name, value);
      response.end(this.answerBody);
    });
  });
  port = 0;

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  /** The bodies whose `type` is `type`, parsed. */
  ofType(type: string): { type: string; timestamp: string; data: Record<string, unknown> }[] {
    return this.requests.map((r) => JSON.parse(r.body)).filter((b) => b.type === type);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** Delivery settings for tests: loopback http allowed, short retries and polls. */
export const FAST: Partial<OutboundWebhookConfig> = {
  allowHttp: true,
  allowPrivate: true,
  retryScheduleMs: [0, 300, 300, 300],
  timeoutMs: 2_000,
  pollMs: 500,
  dispatchMs: 50,
  concurrency: 4,
};

export interface OutboundApp {
  request: ReturnType<typeof supertest>;
  worker: DeliveryWorker;
}

/** An in-process app on the test database with `FAST` delivery settings and `outbound` over them (`other` settings too); its worker not started. */
export async function outboundApp(outbound: Partial<OutboundWebhookConfig> = {}, other: Partial<Config> = {}): Promise<OutboundApp> {
  const base = testConfig();
  const config: Config = { ...base, ...other, outboundWebhooks: { ...base.outboundWebhooks, ...FAST, ...outbound } };
  const { app, deliveryWorker } = await createApp({ config, logger: createLogger('silent'), orm: testDatabase().orm, database: testDatabase() });
  return { request: supertest(app.callback()), worker: deliveryWorker };
}

/** Verifies a request with the reference implementation (standardwebhooks); throws when no signature matches. */
export function verifyDelivery(secret: string, request: { headers: http.IncomingHttpHeaders; body: string }): unknown {
  return new Webhook(secret).verify(request.body, {
    'webhook-id': request.headers['webhook-id'] as string,
    'webhook-timestamp': request.headers['webhook-timestamp'] as string,
    'webhook-signature': request.headers['webhook-signature'] as string,
  });
}

/**
 * Waits until a running worker has made the conversation's owed events into messages (its mark is
 * cleared): a batch posted after that is a message of its own, not coalesced with the ones before.
 */
export function eventsMade(conversationId: string, timeoutMs = 10_000): Promise<boolean> {
  return waitFor(async () => {
    const [row] = await testDatabase().orm.em.getConnection().execute('select webhook_events_from from conversations where id = ?', [conversationId]);
    return row !== undefined && row.webhook_events_from === null;
  }, timeoutMs);
}
