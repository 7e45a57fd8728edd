import { BigIntType, EntitySchema } from '@mikro-orm/core';

/** One row of the append-only audit log: who changed what, when, and in which request. */
export class AuditEntry {
  id!: string;
  occurredAt!: Date;
  /** A user id, `cli:<os user>` for the admin CLI, or `system:<component>` (a payment provider's webhook). */
  actor!: string;
  action!: string;
  targetType!: string;
  targetId!: string;
  requestId!: string | null;
  summary!: Record<string, unknown>;
  /** The organization whose resource the row concerns; null for instance-level changes. */
  orgId!: string | null;
}

export const AuditEntrySchema = new EntitySchema<AuditEntry>({
  class: AuditEntry,
  tableName: 'audit_log',
  properties: {
    // bigint: read as a string, so ids past 2^53 stay exact.
    id: { type: new BigIntType('string'), primary: true, autoincrement: true },
    occurredAt: { type: 'Date' },
    actor: { type: 'string', length: 320 },
    action: { type: 'string', length: 100 },
    targetType: { type: 'string', length: 50 },
    targetId: { type: 'string', length: 255 },
    requestId: { type: 'string', length: 100, nullable: true },
    summary: { type: 'json' },
    orgId: { type: 'uuid', nullable: true },
  },
});
