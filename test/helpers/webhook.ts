import type { Test } from 'supertest';
import type { TestApp } from './app.ts';

type Agent = TestApp['request'];

/** The event webhook of a conversation (the agent-server's id, hyphenated or not). */
export const webhookPath = (conversationId: string): string => `/api/v1/webhooks/events/${conversationId}`;

/**
 * Posts a batch to the event webhook as the holder of `sessionKey` (`null`: no credential).
 * `events` as a string goes out as that exact JSON text. Chain `.expect(status)` on the result.
 */
export function postEvents(client: TestApp | Pick<TestApp, 'request'> | Agent, sessionKey: string | null, conversationId: string, events: unknown): Test {
  const agent = 'request' in client ? client.request : client;
  const request = agent.post(webhookPath(conversationId));
  if (sessionKey !== null) request.set('X-Session-API-Key', sessionKey);
  if (typeof events === 'string') return request.set('Content-Type', 'application/json').send(events);
  return request.send(events as object);
}
