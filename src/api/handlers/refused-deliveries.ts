import type { components, operations } from '../../../generated/openapi.ts';
import type { RefusalService } from '../../refusals/refusal-service.ts';
import { principalOf, respond, type OperationHandlers } from '../context.ts';
import { replayRefusedDelivery, type WebhookReplayer } from '../webhook-replay.ts';

type ListQuery = NonNullable<operations['listRefusedDeliveries']['parameters']['query']>;
type ReplayPath = operations['replayRefusedDelivery']['parameters']['path'];

function pageQuery(query: ListQuery) {
  return {
    conversationId: query.conversation_id,
    since: query.since === undefined ? undefined : new Date(query.since),
    resolved: query.resolved,
    limit: query.limit ?? 20,
    cursor: query.cursor,
  };
}

/** Handlers of the `refused-deliveries` tag; the admin ones are restricted by the spec (x-permission). */
export function refusedDeliveryHandlers(refusals: RefusalService, replay: WebhookReplayer): OperationHandlers {
  return {
    async listRefusedDeliveries(operation, ctx) {
      const query = operation.request.query as ListQuery;
      respond<components['schemas']['RefusedDeliveryPage']>(ctx, 200, await refusals.list({ ownerId: principalOf(operation).orgId, ...pageQuery(query) }));
    },
    async listAllRefusedDeliveries(operation, ctx) {
      respond<components['schemas']['RefusedDeliveryPage']>(ctx, 200, await refusals.list(pageQuery(operation.request.query as ListQuery)));
    },
    async replayRefusedDelivery(operation, ctx) {
      const id = Number((operation.request.params as ReplayPath).refused_delivery_id);
      respond<components['schemas']['RefusedDeliveryReplay']>(ctx, 200, await replayRefusedDelivery(refusals, replay, id));
    },
  };
}
