import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';

/** At most this much of a receiver's response is read; the rest is dropped with the connection. */
export const MAX_RESPONSE_BYTES = 64 * 1024;
/** What the attempt log keeps of a response body. */
const EXCERPT_BYTES = 1024;

/**
 * Connections are kept between attempts (a receiver gets many messages): each new one still connects
 * to the address checked for it, and an idle one is closed before the common 5 s keep-alive of
 * servers, so that an attempt seldom meets a connection the receiver is closing.
 */
const AGENT_OPTIONS = { keepAlive: true, timeout: 4_000, maxSockets: 64 };
const agents = { 'http:': new http.Agent(AGENT_OPTIONS), 'https:': new https.Agent(AGENT_OPTIONS) };

export interface SendResult {
  statusCode: number | null;
  /** Null on a 2xx answer. */
  error: string | null;
  responseExcerpt: string | null;
  durationMs: number;
}

/**
 * POSTs `body` to `url`, connecting to `address` (already checked), within `timeoutMs` from the
 * start to the last byte read. Redirects are not followed (a 3xx is a failed attempt).
 */
export function post(
  url: URL,
  target: { address: string; family: 4 | 6 },
  headers: Record<string, string>,
  body: string,
  timeoutMs: number,
): Promise<SendResult> {
  const started = performance.now();
  const pinned: LookupFunction = (_hostname, options, callback) => {
    if ((options as { all?: boolean }).all) (callback as (e: null, a: { address: string; family: number }[]) => void)(null, [target]);
    else callback(null, target.address, target.family);
  };
  const transport = url.protocol === 'https:' ? https : http;
  const agent = agents[url.protocol as keyof typeof agents];
  return new Promise<SendResult>((resolve) => {
    let settled = false;
    const finish = (statusCode: number | null, error: string | null, excerpt: string | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ statusCode, error, responseExcerpt: excerpt, durationMs: Math.round(performance.now() - started) });
    };
    const request = transport.request(url, {
      method: 'POST',
      lookup: pinned,
      agent,
      headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), 'user-agent': 'agent-platform-webhooks/1' },
    });
    const timer = setTimeout(() => {
      finish(null, `No answer within ${timeoutMs} ms`, null);
      request.destroy();
    }, timeoutMs);
    request.on('error', (error: NodeJS.ErrnoException) => finish(null, `Connection failed: ${error.code ?? error.message}`, null));
    request.on('response', (response) => {
      const chunks: Buffer[] = [];
      let read = 0;
      const done = () => {
        const status = response.statusCode ?? 0;
        // PostgreSQL text holds no NUL character.
        const excerpt = Buffer.concat(chunks).subarray(0, EXCERPT_BYTES).toString('utf8').replaceAll('\u0000', '\ufffd');
        finish(status, status >= 200 && status < 300 ? null : `The receiver answered ${status}`, excerpt);
      };
      response.on('data', (chunk: Buffer) => {
        if (read < MAX_RESPONSE_BYTES) chunks.push(chunk.subarray(0, MAX_RESPONSE_BYTES - read));
        read += chunk.length;
        if (read >= MAX_RESPONSE_BYTES) {
          done();
          response.destroy();
        }
      });
      response.on('end', done);
      response.on('error', () => done());
    });
    request.end(body);
  });
}
