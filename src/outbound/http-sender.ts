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
  /** A 429 or 503 answer's `Retry-After`, in ms from now; absent otherwise or when unreadable. */
  retryAfterMs?: number;
}

/** An HTTP date as servers send it (RFC 9110's IMF-fixdate); `Date.parse` alone reads almost anything as a date. */
const IMF_FIXDATE = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/;

/** `Retry-After` as delta-seconds or an HTTP date (RFC 9110 §10.2.3), in ms from now (never negative); undefined when unreadable. */
export function retryAfterMs(value: string | undefined, now = Date.now()): number | undefined {
  const raw = value?.trim();
  if (!raw) return undefined;
  if (/^\d{1,10}$/.test(raw)) return Number(raw) * 1_000;
  if (!IMF_FIXDATE.test(raw)) return undefined;
  const at = Date.parse(raw);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/**
 * POSTs `body` to `url`, connecting to `address` (already checked), within `timeoutMs` from the
 * start to the last byte read. Redirects are not followed (a 3xx is a failed attempt).
 */
export function post(
  url: URL,
  target: { address: string; family: 4 | 6 },
  headers: Record<string, string>,
  body: string | Buffer,
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
    const finish = (statusCode: number | null, error: string | null, excerpt: string | null, retryAfter?: number) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      const result: SendResult = { statusCode, error, responseExcerpt: excerpt, durationMs: Math.round(performance.now() - started) };
      if (retryAfter !== undefined) result.retryAfterMs = retryAfter;
      resolve(result);
    };
    const request = transport.request(url, {
      method: 'POST',
      lookup: pinned,
      agent,
      headers: { 'user-agent': 'agent-platform-webhooks/1', ...headers, 'content-type': 'application/json', 'content-length': String(typeof body === 'string' ? Buffer.byteLength(body) : body.length) },
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
        const retryAfter = status === 429 || status === 503 ? retryAfterMs(response.headers['retry-after']) : undefined;
        finish(status, status >= 200 && status < 300 ? null : `The receiver answered ${status}`, excerpt, retryAfter);
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
