import http, { type Server } from 'node:http';
import type Koa from 'koa';
import type { Config } from './config.ts';

export type HttpTimeouts = Pick<Config, 'httpHeadersTimeoutMs' | 'httpRequestTimeoutMs' | 'httpKeepAliveTimeoutMs'>;

/**
 * An HTTP server for the app with the connection timeouts of the configuration, so that a slow or
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
  );
}

/** Creates the server and listens on the configured host and port. */
export async function listen(app: Koa<any>, config: Config): Promise<Server> {
  const server = createHttpServer(app, config);
  server.listen(config.port, config.host);
  await new Promise<void>((resolve, reject) => server.once('listening', resolve).once('error', reject));
  return server;
}
