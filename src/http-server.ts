import http, { STATUS_CODES, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type Koa from 'koa';
import type { Config } from './config.ts';

export type HttpTimeouts = Pick<Config, 'httpHeadersTimeoutMs' | 'httpRequestTimeoutMs' | 'httpKeepAliveTimeoutMs'>;

/**
 * An HTTP server for the app (parser errors answered by `answerClientError`) with the connection timeouts of the configuration, so that a slow or
 * stalled client (slowloris headers, a trickled body, an idle keep-alive connection) cannot hold a
 * socket for ever:
 * - `headersTimeout`: the whole header block must arrive within this time (else 408 and close);
 * - `requestTimeout`: the whole request, headers and body, must arrive within this time (408, close);
 * - `keepAliveTimeout`: an idle keep-alive connection is closed after this time.
 */
export function createHttpServer(app: Koa<any>, timeouts: HttpTimeouts): Server {
  return http.createServer(
    {
      headersTimeout: timeouts.httpHeadersTimeoutMs,
      requestTimeout: timeouts.httpRequestTimeoutMs,
      keepAliveTimeout: timeouts.httpKeepAliveTimeoutMs,
      // Node checks the two request timeouts on this interval (default 30 s): keep it well under them.
      connectionsCheckingInterval: Math.min(
        30_000,
        Math.max(100, Math.floor(Math.min(timeouts.httpHeadersTimeoutMs, timeouts.httpRequestTimeoutMs) / 4)),
      ),
    },
    app.callback(),
  ).on('clientError', answerClientError);
}

/** Node's parser errors (`clientError`) by code: the status and the contract's detail sentence. */
const CLIENT_ERRORS: Record<string, [number, string]> = {
  HPE_HEADER_OVERFLOW: [431, 'The request header block is larger than the server accepts'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'The request did not arrive in time'],
  ERR_HTTP_HEADERS_TIMEOUT: [408, 'The request headers did not arrive in time'],
  HPE_CHUNK_EXTENSIONS_OVERFLOW: [413, 'The chunk extensions of the request body are too large'],
};

/**
 * Answers a request Node's HTTP parser refused (before any operation is known: a header block over
 * the limit, a malformed Content-Length or header, raw non-ASCII bytes in the path, a timeout) with
 * the contract's error body, `{"detail": …}` as application/json, instead of Node's empty one.
 */
export function answerClientError(error: NodeJS.ErrnoException, socket: Duplex): void {
  const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  // A reset connection, or a response already under way on it, cannot take an answer.
  if (error.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
    socket.destroy();
    return;
  }
  const [status, detail] = CLIENT_ERRORS[error.code ?? ''] ?? [400, 'The request is not valid HTTP'];
  const body = JSON.stringify({ detail });
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/** Creates the server and listens on the configured host and port. */
export async function listen(app: Koa<any>, config: Config): Promise<Server> {
  const server = createHttpServer(app, config);
  server.listen(config.port, config.host);
  await new Promise<void>((resolve, reject) => server.once('listening', resolve).once('error', reject));
  return server;
}
