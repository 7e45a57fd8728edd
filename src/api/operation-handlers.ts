import type { Services } from '../services.ts';
import type { OperationHandlers } from './context.ts';
import type { WebhookReplayer } from './webhook-replay.ts';
import { accountHandlers } from './handlers/account.ts';
import { auditHandlers } from './handlers/audit.ts';
import { billingHandlers } from './handlers/billing.ts';
import { consoleHandlers } from './handlers/console.ts';
import { conversationHandlers } from './handlers/conversations.ts';
import { healthHandlers } from './handlers/health.ts';
import { liveHandlers } from './handlers/live.ts';
import { operationsHandlers } from './handlers/operations.ts';
import { organizationAdministrationHandlers } from './handlers/organization-administration.ts';
import { organizationHandlers } from './handlers/organizations.ts';
import { outboundWebhookHandlers } from './handlers/outbound-webhooks.ts';
import { refusedDeliveryHandlers } from './handlers/refused-deliveries.ts';
import { sharingHandlers } from './handlers/sharing.ts';
import { searchHandlers } from './handlers/search.ts';
import { superAdminHandlers } from './handlers/super-admins.ts';
import { userHandlers } from './handlers/users.ts';
import { verifiedModelHandlers } from './handlers/verified-models.ts';
import { webhookHandlers } from './handlers/webhooks.ts';
import { workspaceHandlers } from './handlers/workspaces.ts';

/** Every operation's handler, by operationId, over the services (`replay`: the webhook's rules, for refused batches). */
export function operationHandlers(services: Services, replay: WebhookReplayer): OperationHandlers {
  const { metrics, ingestPressure } = services;
  return {
    ...healthHandlers(services.database),
    ...webhookHandlers(services.conversations, services.conversationInfos, {
      entered: () => ingestPressure.entered(),
      left: (stored) => {
        if (stored) metrics.recordWebhookBatch(stored.kinds, stored.result, stored.unrecognized);
        ingestPressure.left(stored !== undefined);
      },
    }),
    ...conversationHandlers(services.conversations),
    ...searchHandlers(services.search),
    ...verifiedModelHandlers(services.verifiedModels),
    ...superAdminHandlers(services.identity),
    ...accountHandlers(services.identity, services.organizations),
    ...organizationHandlers(services.organizations),
    ...userHandlers(services.identity),
    ...auditHandlers(services.audit),
    ...organizationAdministrationHandlers(services.organizationAdministration),
    ...workspaceHandlers(services.workspaces),
    ...billingHandlers(services.billing, services.spend, services.usage, services.budgets),
    ...operationsHandlers(metrics),
    ...liveHandlers(services.conversations, services.liveStreams, services.streamTickets),
    ...consoleHandlers(),
    ...outboundWebhookHandlers(services.webhookEndpoints),
    ...refusedDeliveryHandlers(services.refusals, replay),
    ...sharingHandlers(services.shares),
  };
}
