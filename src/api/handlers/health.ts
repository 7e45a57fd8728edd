import type { components } from '../../../generated/openapi.ts';
import { respond, type OperationHandlers } from '../context.ts';

type Health = components['schemas']['Health'];

/** `/healthz`: the process is up. `/readyz`: the database answers too. */
export function healthHandlers(database: { isReachable(): Promise<boolean> }): OperationHandlers {
  return {
    getHealth(_operation, ctx) {
      respond<Health>(ctx, 200, { status: 'ok' });
    },
    async getReadiness(_operation, ctx) {
      const reachable = await database.isReachable();
      respond<Health>(ctx, reachable ? 200 : 503, { status: reachable ? 'ok' : 'unavailable' });
    },
  };
}
