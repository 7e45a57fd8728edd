import http, { STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import type Koa from 'koa';
import type { Config } from './config.ts';

export type HttpTimeouts = Pick<
  Config,
  'httpHeadersTimeoutMs' | 'httpRequestTimeoutMs' | 'httpKeepAliveTimeoutMs' | 'httpLingerMs' | 'httpLingerBytes'
>;

/**
 * An HTTP server for the app (parser errors answered by `answerClientError`) with the connection timeouts of the configuration, so that a slow or
 * stalled client (slowloris headers, a trickled body, an idle keep-alive connection) cannot hold a
 * socket for ever:
 * - `headersTimeout`: the whole header block must arrive within this time (else 408 and close);
 * - `requestTimeout`: the whole request, headers and body, must arrive within this time (408, close);
 * - `keepAliveTimeout`: an idle keep-alive connection is closed after this time;
 * - `httpLingerMs`/`httpLingerBytes`: the rest of a body we answered without reading is discarded
 *   within these bounds before the connection closes (`lingerAfterEarlyAnswer`).
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
  )
    .on('clientError', answerClientError)
    .on('request', (req: IncomingMessage, res: ServerResponse) => {
      // Without a body there is nothing to linger for.
      if (req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined) return;
      res.once('prefinish', () => {
        if (!req.complete) lingerAfterEarlyAnswer(req, res, timeouts);
      });
    });
}

/**
 * Lingering close, as nginx's `lingering_close`: when we answered before reading the whole body (401,
 * 413, 415, 422, 503), the rest is read and discarded for at most `httpLingerMs` and `httpLingerBytes`
 * before the connection closes. Closing a socket with unread bytes makes the kernel send a reset, and
 * a client still writing its body would meet the reset instead of reading our answer. A keep-alive
 * connection whose body ends within the bounds goes on serving requests, as it does without this.
 */
function lingerAfterEarlyAnswer(req: IncomingMessage, res: ServerResponse, bounds: Pick<HttpTimeouts, 'httpLingerMs' | 'httpLingerBytes'>) {
  const socket = req.socket;
  const stop = () => socket.destroy();
  const deadline = setTimeout(stop, bounds.httpLingerMs);
  socket.once('close', () => clearTimeout(deadline));
  let discarded = 0;
  req.on('data', (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > bounds.httpLingerBytes) stop();
  });
  // Read by us from now on: Node's own dump of an unread body would drop the bytes uncounted, and the
  // body reader leaves a body it refused mid-way (413) paused.
  req.resume();
  let closing = false;
  // After Node's own 'finish' handler, which asks a closing response's socket to close once written.
  res.once('finish', () => {
    if (req.complete) return;
    closing = socket.listeners('finish').includes(socket.destroy);
    socket.removeListener('finish', socket.destroy);
  });
  req.once('end', () => {
    clearTimeout(deadline);
    if (closing) socket.destroySoon();
  });
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
  await listening(server, config);
  return server;
}

/**
 * Fails at once, with one line saying so, when `PORT` is taken: checked before the database starts,
 * so that nothing else has run (and logged) by then. Another process may still take the port before
 * `listen`, which then fails with the same line.
 */
export async function assertPortFree(config: Pick<Config, 'host' | 'port'>): Promise<void> {
  if (config.port === 0) return;
  const probe = net.createServer();
  await listening(probe, config);
  await new Promise((resolve) => probe.close(resolve));
}

async function listening(server: net.Server, config: Pick<Config, 'host' | 'port'>): Promise<void> {
  server.listen(config.port, config.host);
  await new Promise<void>((resolve, reject) =>
    server.once('listening', resolve).once('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EADDRINUSE') {
        reject(new Error(`port ${config.port} on ${config.host} is already in use (PORT=${config.port}): stop what listens there or set PORT to another port`));
      } else if (error.code === 'EACCES') {
        reject(new Error(`port ${config.port} on ${config.host} may not be opened by this user (PORT=${config.port}): choose a port above 1023`));
      } else {
        reject(error);
      }
    }),
  );
}
