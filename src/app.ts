import Koa from 'koa';
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Context as OperationContext, Request as OpenApiRequest } from 'openapi-backend';
import type { Config } from './config.ts';
import type { Logger } from './logger.ts';
import { DomainError, HttpError, InvalidInputError, UnauthenticatedError, httpStatusOf } from './errors.ts';
import { isDatabaseUnavailable } from './db/errors.ts';
import { createOpenApiBackend } from './api/openapi.ts';
import { readJsonBody } from './api/json-body.ts';
import { checkResponsesAgainstSpec } from './api/response-contract.ts';
import { RequestValidationError, toValidationErrors } from './api/validation-errors.ts';
import { checkPathEncoding, withStorableStrings } from './api/storable-strings.ts';
import { callerIdOf, principalOf, type KoaContext, type OperationHandlers, type RequestState } from './api/context.ts';
import { healthHandlers } from './api/handlers/health.ts';
import { conversationHandlers } from './api/handlers/conversations.ts';
import { superAdminHandlers } from './api/handlers/super-admins.ts';
import { accountHandlers } from './api/handlers/account.ts';
import { userHandlers } from './api/handlers/users.ts';
import { auditHandlers } from './api/handlers/audit.ts';
import { AuditLogService } from './audit/audit-service.ts';
import { verifiedModelHandlers } from './api/handlers/verified-models.ts';
import { webhookHandlers } from './api/handlers/webhooks.ts';
import { workspaceHandlers } from './api/handlers/workspaces.ts';
import { billingHandlers } from './api/handlers/billing.ts';
import { operationsHandlers } from './api/handlers/operations.ts';
import { consoleHandlers } from './api/handlers/console.ts';
import { Metrics } from './observability/metrics.ts';
import { poolStatsOf } from './db/pool-stats.ts';
import { outboundQueueDepth } from './outbound/queue-depth.ts';
import { metricsTokenChecker } from './observability/metrics-token.ts';
import { traceRequest } from './observability/request-tracing.ts';
import { liveHandlers } from './api/handlers/live.ts';
import { LiveStreams, registerLiveStreams } from './live/live-streams.ts';
import { StreamTickets } from './live/stream-tickets.ts';
import { Authenticator, requirePermission, type Permission } from './identity/authenticator.ts';
import { IdentityService } from './identity/identity-service.ts';
import { ConversationService } from './conversations/conversation-service.ts';
import { ConversationInfoService } from './conversations/conversation-info-service.ts';
import { VerifiedModelService } from './verified-models/verified-model-service.ts';
import { createWorkspaceService } from './workspaces/setup.ts';
import { createBillingService } from './billing/billing-service.ts';
import { SpendService } from './spend/spend-service.ts';
import type { ChargeOutcome } from './spend/spend-ledger.ts';
import { outboundWebhookHandlers } from './api/handlers/outbound-webhooks.ts';
import { WebhookEndpointService } from './outbound/webhook-endpoint-service.ts';
import { IngestPressure } from './outbound/ingest-pressure.ts';
import { DeliveryWorker, registerDeliveryWorker } from './outbound/delivery-worker.ts';
import { PgBossOutboundQueue } from './outbound/outbound-queue.ts';
import { secretBoxFor } from './workspaces/setup.ts';

export interface AppDeps {
  readonly config: Config;
  readonly logger: Logger;
  readonly orm: MikroORM;
  readonly database: { isReachable(): Promise<boolean>; readonly listenUrl?: string };
}

type ErrorBody = { detail: unknown };

/** Renders any thrown error as the contract's error body; the one error renderer of the service. */
function renderError(error: unknown, ctx: KoaContext, log: Logger): void {
  let status: number;
  let body: ErrorBody;
  if (error instanceof RequestValidationError) {
    status = 422;
    body = { detail: error.detail };
  } else if (error instanceof InvalidInputError) {
    status = 422;
    body = { detail: [{ loc: error.loc, msg: error.message, type: error.type, input: error.input }] };
  } else if (error instanceof DomainError) {
    status = httpStatusOf(error);
    body = { detail: error.message };
    if (error instanceof UnauthenticatedError) ctx.set('WWW-Authenticate', 'APIKey');
  } else if (error instanceof HttpError) {
    status = error.status;
    body = { detail: error.message };
    ctx.set(error.headers);
  } else if (isDatabaseUnavailable(error)) {
    status = 503;
    body = { detail: 'The database is unavailable; retry later' };
    ctx.set('Retry-After', '1');
    log.error({ err: error }, 'database unavailable');
  } else {
    status = 500;
    body = { detail: 'Internal server error' };
    log.error({ err: error }, 'unhandled error');
  }
  ctx.status = status;
  ctx.body = body;
}

/** Builds the Koa application; everything it needs is passed in, so tests build their own. */
export async function createApp(deps: AppDeps): Promise<Koa<RequestState>> {
  const { config, logger, orm } = deps;
  const api = await createOpenApiBackend();

  const authenticator = new Authenticator(orm.em, config.credentialCacheTtlMs);
  const identity = new IdentityService(orm.em);
  const conversations = new ConversationService(orm.em, logger, config.ingestGroup);
  const metrics = new Metrics(() => poolStatsOf(orm));
  const observeSpend = (outcome: ChargeOutcome) => {
    metrics.recordSpend(outcome.chargedMicroUsd, outcome.depleted !== undefined);
    if (outcome.depleted) {
      const { userId, conversationId, balanceMicroUsd } = outcome.depleted;
      // The `billing.balance_depleted` outbound message was stored with the charge (chargeConversationSpend).
      logger.warn({ userId, conversationId, balanceMicroUsd: balanceMicroUsd.toString() }, 'balance depleted: spend took it below zero');
    }
  };
  const conversationInfos = new ConversationInfoService(orm.em, logger, observeSpend);
  const spend = new SpendService(orm.em);
  const verifiedModels = new VerifiedModelService(orm.em);
  // One keyring for every service that seals secrets (workspaces, webhook endpoints): loaded and warned about once.
  const secretBox = secretBoxFor(config, logger);
  const workspaces = createWorkspaceService(config, orm.em, secretBox);
  const billing = createBillingService(orm.em, config.billing, logger);
  const checkMetricsToken = metricsTokenChecker(config.metricsToken);
  // LISTEN needs a session of its own: straight to PostgreSQL, not through a transaction pooler.
  const liveStreams = new LiveStreams(deps.database.listenUrl ?? orm.config.get('clientUrl')!, conversations, {
    bufferBytes: config.liveStreamBufferBytes,
    stallMs: config.liveStreamStallMs,
    heartbeatMs: config.liveStreamHeartbeatMs,
    maxPerUser: config.liveStreamMaxPerUser,
    credentialCheckMs: config.liveStreamCredentialCheckMs,
  }, logger, (ids) => authenticator.stillValid(ids));
  const streamTickets = new StreamTickets(orm.em, config.liveStreamTicketTtlMs);
  const outboundQueue = new PgBossOutboundQueue(orm.em.getConnection().getKnex(), logger);
  const webhookEndpoints = new WebhookEndpointService(orm.em, secretBox, config.outboundWebhooks, outboundQueue);
  // Built here, started by main.ts (or a test): the worker is the app's only background consumer.
  const ingestPressure = new IngestPressure(config.outboundWebhooks.yieldAboveBatchesPerSecond);
  const deliveryWorker = new DeliveryWorker(
    orm.em,
    outboundQueue,
    deps.database.listenUrl ?? orm.config.get('clientUrl')!,
    secretBox,
    config.outboundWebhooks,
    logger,
    { attempt: (type, outcome, seconds) => metrics.recordOutboundAttempt(type, outcome, seconds) },
    ingestPressure,
  );
  metrics.trackOutboundQueueDepth(() => outboundQueueDepth(orm.em));

  const operationHandlers: OperationHandlers = {
    ...healthHandlers(deps.database),
    ...webhookHandlers(conversations, conversationInfos, (kinds, result) => {
      metrics.recordWebhookBatch(kinds, result);
      ingestPressure.note();
    }),
    ...conversationHandlers(conversations),
    ...verifiedModelHandlers(verifiedModels),
    ...superAdminHandlers(identity),
    ...accountHandlers(identity),
    ...userHandlers(identity),
    ...auditHandlers(new AuditLogService(orm.em)),
    ...workspaceHandlers(workspaces),
    ...billingHandlers(billing, spend),
    ...operationsHandlers(metrics),
    ...liveHandlers(conversations, liveStreams, streamTickets),
    ...consoleHandlers(),
    ...outboundWebhookHandlers(webhookEndpoints),
  };

  api.register({
    // Strings PostgreSQL cannot store (`\u0000`, lone surrogates) → 422 naming the field.
    ...withStorableStrings(operationHandlers),
    async postSecurityHandler(c: OperationContext, ctx: KoaContext, request: OpenApiRequest) {
      ctx.state.operationId = c.operation.operationId;
      ctx.state.userId = callerIdOf(c);
      const needsCredential = (c.operation.security ?? []).length > 0;
      if (needsCredential && !c.security?.authorized) return;
      // The permission an operation declares in the spec (`x-permission`) is checked here, once.
      const permission = (c.operation as { 'x-permission'?: Permission })['x-permission'];
      if (permission) requirePermission(principalOf(c), permission);
      // The body is read once the route is known (an unknown path is a 404, not a 415) and the
      // caller is authenticated and permitted: nobody gets us to read and parse megabytes without
      // the right to call the operation.
      if (!c.operation.requestBody) return;
      const body = await readJsonBody(ctx, config.bodyLimitBytes);
      ctx.state.rawBody = body?.raw;
      ctx.state.bodyText = body?.text;
      // Both copies: openapi-backend validates `request`, handlers read `c.request`.
      request.body = body?.value;
      c.request.requestBody = request.body;
      // Read when called: validation, which comes next, copies the request (its `coerced`), and the
      // handler's `c.request` is parsed again from that copy.
      ctx.state.releaseBody = () => {
        request.body = undefined;
        c.request.body = undefined;
        c.request.requestBody = undefined;
        if (c.validation?.coerced) c.validation.coerced.body = undefined;
        ctx.state.rawBody = undefined;
        ctx.state.bodyText = undefined;
      };
    },
    notFound(_c: OperationContext, ctx: KoaContext) {
      throw new HttpError(404, `No route for ${ctx.method} ${ctx.path}`);
    },
    methodNotAllowed(_c: OperationContext, ctx: KoaContext) {
      const allowed = api
        .getOperations()
        .filter((operation) => {
          const match = api.router.matchOperation({ method: operation.method, path: ctx.path, headers: {} });
          return match?.operationId === operation.operationId;
        })
        .flatMap((operation) => (operation.method === 'get' ? ['GET', 'HEAD'] : [operation.method.toUpperCase()]));
      throw new HttpError(405, `Method ${ctx.method} is not allowed on ${ctx.path}`, { Allow: allowed.join(', ') });
    },
    unauthorizedHandler(c: OperationContext) {
      const results = Object.values(c.security ?? {}) as ({ error?: unknown } | undefined)[];
      const errors = results.map((r) => r?.error).filter((e): e is Error => e instanceof Error);
      // Prefer "invalid credential" over "missing header" when the caller sent one of the schemes.
      throw errors.find((e) => e.message.startsWith('Invalid')) ?? errors[0] ?? new UnauthenticatedError('Not authenticated');
    },
    validationFail(c: OperationContext) {
      const validated = {
        requestBody: c.request.requestBody,
        path: c.request.params,
        query: c.request.query,
        header: c.request.headers,
      };
      // The body's validator comes first; its schema resolves the `$ref`s in union errors.
      const [bodyValidator] = api.validator.getRequestValidatorsForOperation(c.operation.operationId!) ?? [];
      const errors = c.validation.errors ?? [];
      throw new RequestValidationError(
        toValidationErrors(errors, validated, (bodyValidator?.schema ?? {}) as object, config.maxValidationErrors),
      );
    },
    notImplemented(c: OperationContext) {
      throw new HttpError(501, `${c.operation.operationId} is not implemented yet`);
    },
  });
  api.registerSecurityHandler('AccessToken', (c: OperationContext) =>
    authenticator.authenticate('access_token', headerOf(c, 'x-access-token')),
  );
  api.registerSecurityHandler('APIKeyHeader', (c: OperationContext) =>
    authenticator.authenticate('session_api_key', headerOf(c, 'x-session-api-key')),
  );
  api.registerSecurityHandler('MetricsToken', (c: OperationContext) => checkMetricsToken(headerOf(c, 'authorization')));
  // Browsers' EventSource cannot send headers: a single-use ticket in the query opens a live stream.
  api.registerSecurityHandler('StreamTicket', (c: OperationContext) => streamTickets.redeem(queryOf(c, 'ticket')));

  const app = new Koa<RequestState>({ proxy: false });
  app.silent = true;
  if (config.responseValidation === 'log') app.use(checkResponsesAgainstSpec());
  registerLiveStreams(app, liveStreams);
  registerDeliveryWorker(app, deliveryWorker);

  // Tracing (request id, access log, metrics) wraps error rendering, which comes first so that it
  // also catches what the body reader throws.
  app.use((ctx, next) =>
    traceRequest(ctx, { logger, metrics }, async () => {
      try {
        await next();
      } catch (error) {
        renderError(error, ctx, logger);
      }
    }),
  );

  app.use(async (ctx) => {
    checkPathEncoding(ctx.path);
    const request: OpenApiRequest = {
      // HEAD is every GET operation answered without its body: routed, authenticated and handled as
      // GET; Koa then sends the status and headers only (Content-Length as GET would send it).
      method: ctx.method === 'HEAD' ? 'GET' : ctx.method,
      path: ctx.path,
      query: ctx.querystring,
      headers: ctx.headers as OpenApiRequest['headers'],
    };
    // The request goes along as a handler argument too: the body reader fills in its body.
    await api.handleRequest(request, ctx, request);
  });

  return app;
}

function headerOf(c: OperationContext, name: string): string | undefined {
  const value = c.request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function queryOf(c: OperationContext, name: string): string | undefined {
  const value = c.request.query?.[name];
  return Array.isArray(value) ? value[0] : value;
}
