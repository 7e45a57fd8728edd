import type { Server } from 'node:http';
import { loadConfig } from './config.ts';
import { createLogger } from './logger.ts';
import { openDatabase } from './db/database.ts';
import { createApp } from './app.ts';
import { liveStreamsOf } from './live/live-streams.ts';

/** Load config → open the database (migrated) → create the app → listen; stop cleanly on signals. */
async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  const database = await openDatabase(config.database, logger);
  let server: Server;
  let app: Awaited<ReturnType<typeof createApp>>;
  try {
    app = await createApp({ config, logger, orm: database.orm, database });
    server = app.listen(config.port, config.host);
    await new Promise<void>((resolve, reject) => server.once('listening', resolve).once('error', reject));
  } catch (error) {
    await database.close();
    throw error;
  }
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  logger.info({ url: `http://${config.host}:${port}`, database: config.database.kind }, 'server listening');

  let shuttingDown = false;
  const shutdown = async (signal: string) => {
    if (shuttingDown) return;
    shuttingDown = true;
    logger.info({ signal }, 'shutting down: finishing in-flight requests');
    // Live streams never finish by themselves: end them (clients resume elsewhere) while the
    // database they read from is still open.
    await liveStreamsOf(app)?.close();
    const forced = setTimeout(() => {
      logger.warn('in-flight requests did not finish in time; closing connections');
      server.closeAllConnections();
    }, config.shutdownGraceMs);
    // Stop accepting, let in-flight requests finish, drop idle keep-alive connections.
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
    });
    clearTimeout(forced);
    await database.close();
    logger.info('stopped');
    process.exit(0);
  };
  process.on('SIGTERM', (signal) => void shutdown(signal));
  process.on('SIGINT', (signal) => void shutdown(signal));
}

main().catch((error: unknown) => {
  // The logger may not exist yet (bad configuration), so this goes straight to stderr.
  console.error(`failed to start: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
