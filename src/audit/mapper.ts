import type { components } from '../../generated/openapi.ts';
import type { AuditEntry } from './entities.ts';

export type AuditEntryView = components['schemas']['AuditEntry'];

/** The API's view of an audit row. */
export function toAuditEntryView(entry: AuditEntry): AuditEntryView {
  return {
    id: Number(entry.id),
    occurred_at: entry.occurredAt.toISOString(),
    actor: entry.actor,
    action: entry.action,
    target_type: entry.targetType,
    target_id: entry.targetId,
    request_id: entry.requestId,
    summary: entry.summary,
    org_id: entry.orgId,
  };
}
