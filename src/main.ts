import type { Server } from 'node:http';
import { loadConfig } from './config.ts';
import { createLogger } from './logger.ts';
import { openDatabase, type Database } from './db/database.ts';
import { createApp, type App } from './app.ts';
import { assertPortFree, listen } from './http-server.ts';
import { RetentionService } from './retention/retention-service.ts';
import { RefusedDeliveryRetention } from './retention/refused-deliveries.ts';
import { IdempotencyRecordRetention } from './retention/idempotency-records.ts';
import { WebhookMessageRetention } from './retention/webhook-messages.ts';
import { buildConsole, consoleIsBuilt } from './console/bundle.ts';
import { missingSecretKeysProblem } from './workspaces/setup.ts';
import { IdentityService } from './identity/identity-service.ts';
import { firstSuperAdminCommand, listeningUrl } from './startup-log.ts';

/**
 * Load config → open the database (migrated) → create the app → listen; stop cleanly on signals.
 *
 * SIGTERM/SIGINT are handled from the first line on: a signal during start-up (while the embedded
 * PostgreSQL starts or migrations run) lets start-up finish its current step, then stops what was
 * started, so no PostgreSQL is left orphaned. `npm start` execs node directly (see package.json),
 * so the signal sent to the process that was started reaches this code.
 */
async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);

  let stopRequested: string | undefined;
  let stop: ((signal: string) => void) | undefined;
  const onSignal = (signal: string) => {
    if (stop) return stop(signal);
    if (!stopRequested) logger.info({ signal }, 'signal during start-up: stopping once the current step is done');
    stopRequested ??= signal;
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);

  await assertPortFree(config);
  const database: Database = await openDatabase(config.database, logger);
  if (stopRequested) {
    await database.close();
    logger.info('stopped');
    process.exit(0);
  }
  let server: Server;
  let built: App;
  try {
    const keyProblem = await missingSecretKeysProblem(config, database.orm.em, logger);
    if (keyProblem) throw new Error(keyProblem);
    built = await createApp({ config, logger, orm: database.orm, database });
    // A fresh clone has no built console: build it now so that the first page is not slow.
    if (!consoleIsBuilt()) logger.info({ ms: Math.round(await buildConsole()) }, 'console built');
    // Owed messages are made before the first request is served (the port was checked before the database).
    if (config.outboundWebhooks.worker) await built.deliveryWorker.start();
    server = await listen(built.app, config);
  } catch (error) {
    await database.close();
    throw error;
  }
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const url = listeningUrl(config.host, port);
  logger.info({ url, docs: `${url}/docs`, database: config.database.kind }, `listening on ${url} — API reference: ${url}/docs`);
  try {
    await built.rateLimitInstances.start();
    // OUTBOUND_WEBHOOK_YIELD_ABOVE=0: work behind the webhook here yields to no webhook, this one's or another's.
    const yields = config.outboundWebhooks.yieldAboveBatchesPerSecond > 0;
    built.sharedPressure.start(yields && (config.outboundWebhooks.worker || config.search.indexer));
    if (config.search.indexer) built.searchIndexer.start();
  } catch (error) {
    server.close();
    await database.close();
    throw error;
  }
  // A failed look-up only costs the hint; the server is already serving.
  if (!(await new IdentityService(database.orm.em).hasUsers().catch(() => true))) {
    const command = firstSuperAdminCommand(config);
    const where = config.database.kind === 'url' ? " (with this server's DATABASE_URL in the environment)" : '';
    logger.info({ command }, `no user yet; create the first super admin${where}: ${command}`);
  }
  const retention = config.retention && new RetentionService(database.orm.em, database.listenUrl, config.retention, logger);
  retention?.start();
  const refusalRetention = new RefusedDeliveryRetention(database.orm.em, config.refusedDeliveryRetentionDays, logger);
  refusalRetention.start();
  const idempotencyRetention = new IdempotencyRecordRetention(database.orm.em, logger);
  idempotencyRetention.start();
  const messageRetention = new WebhookMessageRetention(database.orm.em, config.outboundWebhooks.messageRetentionDays, logger, built.sharedPressure);
  messageRetention.start();

  let shuttingDown = false;
  const shutdown = async (signal: string) => {
    if (shuttingDown) return;
    shuttingDown = true;
    const started = Date.now();
    logger.info({ signal }, 'shutting down: finishing in-flight requests');
    const retentionStopped = Promise.all([retention?.stop(), refusalRetention.stop(), idempotencyRetention.stop(), messageRetention.stop(), built.searchIndexer.stop(), built.sharedPressure.stop()]);
    // Live streams never finish by themselves: end them (clients resume elsewhere) while the
    // database they read from is still open.
    await built.liveStreams.close();
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
    await retentionStopped;
    await built.rateLimitInstances.stop();
    // Attempts in flight finish (or are given up on and made again elsewhere) before the pool closes.
    await built.deliveryWorker.stop(config.shutdownGraceMs);
    await database.close();
    logger.info({ ms: Date.now() - started }, 'stopped');
    process.exit(0);
  };
  stop = (signal) => void shutdown(signal);
  if (stopRequested) stop(stopRequested);
}

main().catch((error: unknown) => {
  // The logger may not exist yet (bad configuration), so this goes straight to stderr.
  console.error(`failed to start: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
