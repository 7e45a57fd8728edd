import type { operations } from '../../../generated/openapi.ts';
import type { AuditLogService } from '../../audit/audit-service.ts';
import { principalOf, respond, type OperationHandlers } from '../context.ts';

type AuditQuery = NonNullable<operations['listAuditLog']['parameters']['query']>;
type OrgAuditQuery = NonNullable<operations['listOrganizationAuditLog']['parameters']['query']>;

/** Handlers of the `audit` tag; the spec restricts them to VIEW_AUDIT_LOG, and an organization's to its VIEW_ORG_AUDIT_LOG. */
export function auditHandlers(audit: AuditLogService): OperationHandlers {
  return {
    async listAuditLog(operation, ctx) {
      const query = operation.request.query as AuditQuery;
      respond(
        ctx,
        200,
        await audit.list({
          actor: query.actor,
          action: query.action,
          targetType: query.target_type,
          targetId: query.target_id,
          since: query.since === undefined ? undefined : new Date(query.since),
          until: query.until === undefined ? undefined : new Date(query.until),
          beforeId: query.before_id === undefined ? undefined : Number(query.before_id),
          limit: query.limit ?? 50,
        }),
      );
    },
    async listOrganizationAuditLog(operation, ctx) {
      const query = operation.request.query as OrgAuditQuery;
      respond(
        ctx,
        200,
        await audit.list({
          // The path's organization, as `scopeToOrganization` resolved it for a member.
          orgId: principalOf(operation).orgId,
          action: query.action,
          beforeId: query.before_id === undefined ? undefined : Number(query.before_id),
          limit: query.limit ?? 50,
        }),
      );
    },
  };
}
