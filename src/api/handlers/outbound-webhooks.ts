import type { operations } from '../../../generated/openapi.ts';
import { webhookEventCatalog } from '../../outbound/event-catalog.ts';
import type { EndpointChanges, NewEndpoint, RetryFilter, WebhookEndpointService } from '../../outbound/webhook-endpoint-service.ts';
import { principalOf, respond, type OperationHandlers } from '../context.ts';

type EndpointPath = operations['getWebhookEndpoint']['parameters']['path'];
type MessagePath = operations['retryWebhookMessage']['parameters']['path'];
type RecoverTaskPath = operations['getWebhookRecoverTask']['parameters']['path'];
type RetryTaskPath = operations['getWebhookMessageRetry']['parameters']['path'];
type RecoverBody = operations['recoverWebhookEndpoint']['requestBody']['content']['application/json'];
type StatsQuery = NonNullable<operations['getWebhookEndpointStats']['parameters']['query']>;
type MessagesQuery = NonNullable<operations['listWebhookMessages']['parameters']['query']>;

/** Handlers of the `outbound-webhooks` tag: the caller's own endpoints only (another's → 404). */
export function outboundWebhookHandlers(service: WebhookEndpointService): OperationHandlers {
  return {
    async createWebhookEndpoint(operation, ctx) {
      respond(ctx, 201, await service.create(principalOf(operation), operation.request.requestBody as NewEndpoint));
    },
    async listWebhookEndpoints(operation, ctx) {
      respond(ctx, 200, { items: await service.list(principalOf(operation)) });
    },
    listWebhookEventTypes(operation, ctx) {
      respond(ctx, 200, { items: webhookEventCatalog(operation.api.definition) });
    },
    async getWebhookEndpoint(operation, ctx) {
      const { endpoint_id } = operation.request.params as EndpointPath;
      respond(ctx, 200, await service.get(principalOf(operation), endpoint_id));
    },
    async updateWebhookEndpoint(operation, ctx) {
      const { endpoint_id } = operation.request.params as EndpointPath;
      respond(ctx, 200, await service.update(principalOf(operation), endpoint_id, operation.request.requestBody as EndpointChanges));
    },
    async deleteWebhookEndpoint(operation, ctx) {
      const { endpoint_id } = operation.request.params as EndpointPath;
      await service.delete(principalOf(operation), endpoint_id);
      ctx.status = 204;
    },
    async rotateWebhookEndpointSecret(operation, ctx) {
      const { endpoint_id } = operation.request.params as EndpointPath;
      respond(ctx, 200, await service.rotateSecret(principalOf(operation), endpoint_id));
    },
    async sendWebhookEndpointTest(operation, ctx) {
      const { endpoint_id } = operation.request.params as EndpointPath;
      respond(ctx, 202, await service.sendTest(principalOf(operation), endpoint_id));
    },
    async listWebhookMessages(operation, ctx) {
      const { endpoint_id } = operation.request.params as EndpointPath;
      const { limit, cursor, ...filter } = operation.request.query as MessagesQuery;
      respond(ctx, 200, await service.listMessages(principalOf(operation), endpoint_id, { limit: Number(limit ?? 50), cursor, filter }));
    },
    async listWebhookMessageAttempts(operation, ctx) {
      const { endpoint_id, message_id } = operation.request.params as MessagePath;
      respond(ctx, 200, { items: await service.listAttempts(principalOf(operation), endpoint_id, message_id) });
    },
    async getWebhookEndpointStats(operation, ctx) {
      const { endpoint_id } = operation.request.params as EndpointPath;
      const { window } = (operation.request.query ?? {}) as StatsQuery;
      respond(ctx, 200, await service.stats(principalOf(operation), endpoint_id, window ?? '24h'));
    },
    async recoverWebhookEndpoint(operation, ctx) {
      const { endpoint_id } = operation.request.params as EndpointPath;
      respond(ctx, 202, await service.recover(principalOf(operation), endpoint_id, operation.request.requestBody as RecoverBody));
    },
    async getWebhookRecoverTask(operation, ctx) {
      const { endpoint_id, task_id } = operation.request.params as RecoverTaskPath;
      respond(ctx, 200, await service.getRecoverTask(principalOf(operation), endpoint_id, task_id));
    },
    async createWebhookMessageRetry(operation, ctx) {
      const { endpoint_id } = operation.request.params as EndpointPath;
      respond(ctx, 202, await service.retryMessages(principalOf(operation), endpoint_id, operation.request.requestBody as RetryFilter));
    },
    async getWebhookMessageRetry(operation, ctx) {
      const { endpoint_id, task_id } = operation.request.params as RetryTaskPath;
      respond(ctx, 200, await service.getRetryTask(principalOf(operation), endpoint_id, task_id));
    },
    async retryWebhookMessage(operation, ctx) {
      const { endpoint_id, message_id } = operation.request.params as MessagePath;
      respond(ctx, 202, await service.retry(principalOf(operation), endpoint_id, message_id));
    },
  };
}
