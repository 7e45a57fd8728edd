import type { LookupFunction } from 'node:net';
import { Pool, type Dispatcher } from 'undici';

/** At most this much of a receiver's response is read; the rest is dropped with the connection. */
export const MAX_RESPONSE_BYTES = 64 * 1024;
/** What the attempt log keeps of a response body. */
const EXCERPT_BYTES = 1024;

/**
 * Connections are kept between attempts (a receiver gets many messages) in a pool per origin and checked
 * address, so each new one still connects to the address checked for it; an idle one is closed before the
 * common 5 s keep-alive of servers, so that an attempt seldom meets a connection the receiver is closing.
 * undici's `dispatch` rather than `http.request`: it cost 63 µs of CPU per attempt against 152 (docs/performance.md).
 */
const POOL_OPTIONS = { connections: 64, keepAliveTimeout: 4_000, keepAliveMaxTimeout: 4_000, headersTimeout: 0, bodyTimeout: 0 };
/** Pools kept; past this many the least recently used is closed (its attempts in flight finish first). */
const MAX_POOLS = 1_024;
const pools = new Map<string, Pool>();

function poolFor(url: URL, target: { address: string; family: 4 | 6 }, connectTimeout: number): Pool {
  const key = `${url.origin} ${target.address}`;
  let pool = pools.get(key);
  if (pool) {
    pools.delete(key);
  } else {
    const pinned: LookupFunction = (_hostname, options, callback) => {
      if ((options as { all?: boolean }).all) (callback as (e: null, a: { address: string; family: number }[]) => void)(null, [target]);
      else callback(null, target.address, target.family);
    };
    pool = new Pool(url.origin, { ...POOL_OPTIONS, connectTimeout, connect: { lookup: pinned } });
    if (pools.size >= MAX_POOLS) {
      const [oldest, closing] = pools.entries().next().value!;
      pools.delete(oldest);
      void closing.close().catch(() => undefined);
    }
  }
  pools.set(key, pool);
  return pool;
}

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
  return new Promise<SendResult>((resolve) => {
    let settled = false;
    let controller: Dispatcher.DispatchController | undefined;
    let status = 0;
    let retryAfterHeader: string | undefined;
    const chunks: Buffer[] = [];
    let read = 0;
    const finish = (statusCode: number | null, error: string | null, excerpt: string | null, retryAfter?: number) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      const result: SendResult = { statusCode, error, responseExcerpt: excerpt, durationMs: Math.round(performance.now() - started) };
      if (retryAfter !== undefined) result.retryAfterMs = retryAfter;
      resolve(result);
    };
    const answered = () => {
      // PostgreSQL text holds no NUL character.
      const excerpt = Buffer.concat(chunks).subarray(0, EXCERPT_BYTES).toString('utf8').replaceAll('\u0000', '\ufffd');
      const retryAfter = status === 429 || status === 503 ? retryAfterMs(retryAfterHeader) : undefined;
      finish(status, status >= 200 && status < 300 ? null : `The receiver answered ${status}`, excerpt, retryAfter);
    };
    const timer = setTimeout(() => {
      finish(null, `No answer within ${timeoutMs} ms`, null);
      controller?.abort(new Error('timed out'));
    }, timeoutMs);
    // By lower-case name, so that an endpoint's `User-Agent` replaces ours instead of going beside it.
    const sent: Record<string, string> = { 'user-agent': 'agent-platform-webhooks/1' };
    for (const name in headers) sent[name.toLowerCase()] = headers[name]!;
    sent['content-type'] = 'application/json';
    sent['content-length'] = String(typeof body === 'string' ? Buffer.byteLength(body) : body.length);
    const options: Dispatcher.DispatchOptions = { path: url.pathname + url.search, method: 'POST', headers: sent, body };
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(c) {
        controller = c;
        // Settled before it started: only the timer can have done that.
        if (settled) c.abort(new Error('timed out'));
      },
      onResponseStart(_c, statusCode, responseHeaders) {
        status = statusCode;
        const value = responseHeaders['retry-after'];
        retryAfterHeader = Array.isArray(value) ? value[0] : value;
      },
      onResponseData(c, chunk) {
        if (read < MAX_RESPONSE_BYTES) chunks.push(chunk.subarray(0, MAX_RESPONSE_BYTES - read));
        read += chunk.length;
        if (read >= MAX_RESPONSE_BYTES) {
          answered();
          c.abort(new Error('response too large'));
        }
      },
      onResponseEnd: answered,
      onResponseError(_c, error: NodeJS.ErrnoException) {
        // After the status line an error ends the read (the receiver closed mid-body): what came counts, as before.
        if (status !== 0) answered();
        else finish(null, `Connection failed: ${connectionError(error)}`, null);
      },
    };
    try {
      poolFor(url, target, timeoutMs).dispatch(options, handler);
    } catch (error) {
      finish(null, `Connection failed: ${connectionError(error as NodeJS.ErrnoException)}`, null);
    }
  });
}

/** The system's code (ECONNREFUSED, ECONNRESET…), else undici's message ("other side closed"). */
function connectionError(error: NodeJS.ErrnoException): string {
  const cause = error.cause as NodeJS.ErrnoException | undefined;
  if (error.code && !error.code.startsWith('UND_ERR')) return error.code;
  if (cause?.code && !cause.code.startsWith('UND_ERR')) return cause.code;
  return error.message;
}
