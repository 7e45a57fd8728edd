import type { Middleware } from 'koa';
import type { Context as OperationContext, OpenAPIBackend, Request as OpenApiRequest } from 'openapi-backend';
import type { Config } from '../config.ts';
import { HttpError, UnauthenticatedError } from '../errors.ts';
import { requirePermission, type Authenticator, type Permission } from '../identity/authenticator.ts';
import type { StreamTickets } from '../live/stream-tickets.ts';
import { metricsTokenChecker } from '../observability/metrics-token.ts';
import { callerIdOf, headerOf, principalOf, type KoaContext, type OperationHandlers, type RequestState } from './context.ts';
import { admitsUnrecognizedEvents, type EventCompatibility } from './event-compatibility.ts';
import { RequestBodyBudget, readOperationBody } from './request-body.ts';
import { scopeToOrganization } from './organization-scope.ts';
import { checkPathEncoding } from './storable-strings.ts';
import { enforceRateLimit, rateLimitClasses } from './rate-limits.ts';
import type { RateLimiter } from '../rate-limits/rate-limiter.ts';
import { requestValidationError } from './validation-errors.ts';

/**
 * The Koa middleware that hands each request to openapi-backend. HEAD is every GET operation answered
 * without its body: routed, authenticated and handled as GET; Koa then sends the status and headers only.
 */
export function serveOperations(api: OpenAPIBackend): Middleware<RequestState> {
  return async (ctx) => {
    checkPathEncoding(ctx.path);
    const request: OpenApiRequest = {
      method: ctx.method === 'HEAD' ? 'GET' : ctx.method,
      path: ctx.path,
      query: ctx.querystring,
      headers: ctx.headers as OpenApiRequest['headers'],
    };
    // The request goes along as a handler argument too: the body reader fills in its body.
    await api.handleRequest(request, ctx, request);
  };
}

/**
 * openapi-backend's special handlers, which make the contract's answers: `Cache-Control: no-store` on
 * what a credential opened, the rate limit, the permission check and the body read after security,
 * 404/405/401/422/501 as the contract's errors.
 */
export function contractHandlers(
  api: OpenAPIBackend,
  config: Pick<Config, 'bodyLimitBytes' | 'maxValidationErrors' | 'webhookSingleEventLimitBytes' | 'requestBodyBudgetBytes'>,
  handlers: OperationHandlers,
  eventCompatibility: EventCompatibility | undefined,
  rateLimiter: RateLimiter,
  authenticator: Authenticator,
) {
  const bodyBudget = new RequestBodyBudget(config.requestBodyBudgetBytes);
  const limitClasses = rateLimitClasses(api);
  return {
    async postSecurityHandler(c: OperationContext, ctx: KoaContext, request: OpenApiRequest) {
      ctx.state.operationId = c.operation.operationId;
      ctx.state.userId = callerIdOf(c);
      const needsCredential = (c.operation.security ?? []).length > 0;
      if (needsCredential && !c.security?.authorized) return;
      // What a credential opened is nobody else's: no cache (browser, proxy) keeps it, errors included.
      if (needsCredential) ctx.set('Cache-Control', 'no-store');
      // The class each operation declares in the spec (`x-rate-limit-class`) is checked here, once.
      enforceRateLimit(rateLimiter, limitClasses.get(c.operation.operationId!)!, c, ctx);
      // The permission an operation declares in the spec (`x-permission`) is checked here, once.
      const permission = (c.operation as { 'x-permission'?: Permission })['x-permission'];
      if (permission) requirePermission(principalOf(c), permission);
      // The organization it acts in, and the role there its `x-org-permission` needs: here, once.
      ctx.state.orgId = await scopeToOrganization(c, authenticator);
      // Read only once routed (an unknown path is a 404, not a 415), authenticated and permitted.
      if (!c.operation.requestBody) return;
      const body = await readOperationBody(ctx, c.operation.operationId, config, bodyBudget);
      ctx.state.rawBody = body?.raw;
      ctx.state.bodyText = body?.text;
      // Both copies: openapi-backend validates `request`, handlers read `c.request`.
      request.body = body?.value;
      c.request.requestBody = request.body;
    },
    preOperationHandler(c: OperationContext, _ctx: KoaContext, request: OpenApiRequest) {
      if (request.body === undefined) return;
      // Validated: the handler's `c.request` is now the parsed body's only holder (see `releaseRequestBody`).
      request.body = undefined;
      if (c.validation?.coerced) c.validation.coerced.body = undefined;
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
    validationFail(c: OperationContext, ctx: KoaContext) {
      // accept-unknown: a batch refused only for kinds or properties the spec does not know is stored, flagged.
      if (eventCompatibility && admitsUnrecognizedEvents(eventCompatibility, c, ctx)) return handlers.ingestEvents!(c, ctx);
      const validated = {
        requestBody: c.request.requestBody,
        path: c.request.params,
        query: c.request.query,
        header: c.request.headers,
      };
      throw requestValidationError(api, c.operation.operationId!, c.validation.errors ?? [], validated, config.maxValidationErrors);
    },
    notImplemented(c: OperationContext) {
      throw new HttpError(501, `${c.operation.operationId} is not implemented yet`);
    },
  };
}

/** The handlers of the spec's security schemes, by scheme name. */
export function securityHandlers(authenticator: Authenticator, streamTickets: StreamTickets, metricsToken: string | undefined) {
  const checkMetricsToken = metricsTokenChecker(metricsToken);
  return {
    AccessToken: (c: OperationContext) => authenticator.authenticate('access_token', headerOf(c, 'x-access-token')),
    APIKeyHeader: (c: OperationContext) => authenticator.authenticate('session_api_key', headerOf(c, 'x-session-api-key')),
    MetricsToken: (c: OperationContext) => checkMetricsToken(headerOf(c, 'authorization')),
    // Browsers' EventSource cannot send headers: a single-use ticket in the query opens a live stream.
    StreamTicket: (c: OperationContext) => streamTickets.redeem(queryOf(c, 'ticket')),
  };
}

function queryOf(c: OperationContext, name: string): string | undefined {
  const value = c.request.query?.[name];
  return Array.isArray(value) ? value[0] : value;
}
