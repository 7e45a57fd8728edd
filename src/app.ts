import type { SearchIndexer } from './search/indexer.ts';
import Koa from 'koa';
import { createOpenApiBackend } from './api/openapi.ts';
import { checkResponsesAgainstSpec } from './api/response-contract.ts';
import { contractHandlers, securityHandlers, serveOperations } from './api/contract-handlers.ts';
import { operationHandlers } from './api/operation-handlers.ts';
import { refusalRecorder } from './api/refusal-recorder.ts';
import { webhookReplayer } from './api/webhook-replay.ts';
import { eventCompatibilityFor } from './api/event-compatibility.ts';
import { renderError } from './api/render-error.ts';
import { OutageLog } from './observability/outage-log.ts';
import { withStorableStrings } from './api/storable-strings.ts';
import { idempotentOperationIds, withIdempotency } from './api/idempotency.ts';
import type { RequestState } from './api/context.ts';
import { traceRequest } from './observability/request-tracing.ts';
import { buildServices, type AppDeps } from './services.ts';
import type { DeliveryWorker } from './outbound/delivery-worker.ts';
import type { LiveStreams } from './live/live-streams.ts';
import type { RateLimitInstances } from './rate-limits/instances.ts';
import type { SharedIngestPressure } from './outbound/shared-pressure.ts';

/** The app and what its owner starts and stops with it (main.ts, or a test). */
export interface App {
  readonly app: Koa<RequestState>;
  /** Built, not started: `main.ts` starts it when this instance delivers outbound webhooks. */
  readonly deliveryWorker: DeliveryWorker;
  /** Ended on shutdown: live streams never finish by themselves. */
  readonly liveStreams: LiveStreams;
  /** Built, not started: `main.ts` starts it, so this instance takes its share of the rate limits among the running ones. */
  readonly rateLimitInstances: RateLimitInstances;
  /** Built, not started: `main.ts` starts it when this instance indexes (`SEARCH_INDEXER`). */
  readonly searchIndexer: SearchIndexer;
  /** Built, not started: `main.ts` starts it, so that work behind the webhook on any instance yields to this one's. */
  readonly sharedPressure: SharedIngestPressure;
}

/** Wires the services, openapi-backend and the Koa pipeline; everything is passed in, so tests build their own. */
export async function createApp(deps: AppDeps): Promise<App> {
  const { config, logger } = deps;
  const services = buildServices(deps);
  const api = await createOpenApiBackend();
  const eventCompatibility = eventCompatibilityFor(api, config.webhookEventCompatibility);
  // Strings PostgreSQL cannot store (`\u0000`, lone surrogates) → 422 naming the field.
  const handlers = withIdempotency(
    withStorableStrings(operationHandlers(services, webhookReplayer(api, services.conversations, config, eventCompatibility))),
    idempotentOperationIds(api),
    services.idempotency,
  );
  api.register({ ...handlers, ...contractHandlers(api, config, handlers, eventCompatibility, services.rateLimiter, services.authenticator) });
  for (const [scheme, handler] of Object.entries(securityHandlers(services.authenticator, services.streamTickets, config.metricsToken))) {
    api.registerSecurityHandler(scheme, handler);
  }

  const recordRefusal = refusalRecorder(services.refusals, logger, (refusal) => services.metrics.recordWebhookRefusal(refusal.status, refusal.reason));
  const app = new Koa<RequestState>({ proxy: false });
  app.silent = true;
  if (config.responseValidation === 'log') app.use(checkResponsesAgainstSpec());
  // Requests answered 503 for want of the database: one line when that begins, one when a probe finds it back.
  const requestOutage = new OutageLog('request path', 'requests refused', logger, services.metrics.outageObserver, {
    reachable: () => deps.database.isReachable(),
    everyMs: 1_000,
  });
  // Tracing (request id, access log, metrics) wraps error rendering, which also catches what the body reader throws.
  app.use((ctx, next) =>
    traceRequest(ctx, { logger, metrics: services.metrics }, async () => {
      try {
        await next();
      } catch (error) {
        renderError(error, ctx, logger, requestOutage);
        await recordRefusal(ctx, error);
      }
    }),
  );
  app.use(serveOperations(api));
  const { deliveryWorker, liveStreams, rateLimitInstances, searchIndexer, sharedPressure } = services;
  return { app, deliveryWorker, liveStreams, rateLimitInstances, searchIndexer, sharedPressure };
}
