import { sqlRun, type SqlRunner } from '../db/sql.ts';

/** The audit log's SQL (reads go through the `AuditEntry` entity). */

/** Appends one row: actor, action, target type, target id, request id, summary (JSON text), organization. */
const AUDIT_INSERT = 'insert into audit_log (actor, action, target_type, target_id, request_id, summary, org_id) values ($1, $2, $3, $4, $5, $6::jsonb, $7)';

export async function insertAuditRow(on: SqlRunner, values: readonly unknown[]): Promise<void> {
  await sqlRun(on, AUDIT_INSERT, values);
}
