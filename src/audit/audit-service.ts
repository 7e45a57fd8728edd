import os from 'node:os';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../../generated/openapi.ts';
import { requestContext } from '../observability/request-context.ts';
import { User } from '../identity/entities.ts';
import { AuditEntry } from './entities.ts';
import { toAuditEntryView } from './mapper.ts';
import { insertAuditRow } from './queries.ts';
import type { SqlRunner } from '../db/sql.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Who made a change: a user id, `cli:<os user>` (the admin CLI, see `cliActor`), or
 * `system:<component>` for changes no person asked for (a payment provider's webhook).
 */
export type AuditActor = string;

/** What one change appends to the audit log. `summary` says what changed; never put a secret in it. */
export interface AuditRecord {
  actor: AuditActor;
  /** `<target type>.<past-tense verb>`, e.g. `key.created`, `user.suspended`. */
  action: string;
  targetType: string;
  targetId: string | number;
  summary?: Record<string, unknown>;
  /** The organization whose resource it concerns (`principal.orgId`); absent for instance-level changes. */
  orgId?: string | null;
}

function auditValues(record: AuditRecord): unknown[] {
  return [
    record.actor,
    record.action,
    record.targetType,
    String(record.targetId),
    requestContext.getStore()?.requestId ?? null,
    JSON.stringify(record.summary ?? {}),
    record.orgId ?? null,
  ];
}

/** Appends one audit row in the caller's transaction (`em` from `em.transactional`, or a knex transaction), with the current request's id. */
export async function recordAudit(on: SqlRunner, record: AuditRecord): Promise<void> {
  await insertAuditRow(on, auditValues(record));
}

/** The actor of the admin CLI: `cli:` and the operating-system user running it. */
export function cliActor(): AuditActor {
  let name: string;
  try {
    name = os.userInfo().username;
  } catch {
    name = process.env.USER ?? 'unknown';
  }
  return `cli:${name}`;
}

export type AuditLogPage = components['schemas']['AuditLogPage'];

export interface AuditLogQuery {
  actor?: string;
  action?: string;
  targetType?: string;
  targetId?: string;
  /** Only the rows of this organization (`GET /api/orgs/{org_id}/audit-log`). */
  orgId?: string;
  since?: Date;
  until?: Date;
  /** Keyset pagination: only rows with a smaller id (older) than this. */
  beforeId?: number;
  limit: number;
}

/** Reads the audit log, newest first. */
export class AuditLogService {
  constructor(private readonly em: EntityManager) {}

  /** One page of rows matching every given filter; `next_before_id` continues it (null: no more). */
  async list(query: AuditLogQuery): Promise<AuditLogPage> {
    const where: Record<string, unknown> = {};
    if (query.actor !== undefined) where.actor = query.actor;
    if (query.action !== undefined) where.action = query.action;
    if (query.targetType !== undefined) where.targetType = query.targetType;
    if (query.targetId !== undefined) where.targetId = query.targetId;
    if (query.orgId !== undefined) where.orgId = query.orgId;
    const occurredAt: Record<string, Date> = {};
    if (query.since) occurredAt.$gte = query.since;
    if (query.until) occurredAt.$lt = query.until;
    if (Object.keys(occurredAt).length > 0) where.occurredAt = occurredAt;
    if (query.beforeId !== undefined) where.id = { $lt: String(query.beforeId) };
    // One more than asked: whether another page follows, without a count.
    const rows = await this.em.fork().find(AuditEntry, where, { orderBy: { id: 'desc' }, limit: query.limit + 1 });
    const items = rows.slice(0, query.limit);
    const more = rows.length > query.limit;
    const people = await this.emailsOf(items.flatMap((row) => [row.actor, ...(row.targetType === 'user' ? [row.targetId] : [])]));
    return { items: items.map(toAuditEntryView), next_before_id: more ? Number(items[items.length - 1]!.id) : null, people };
  }

  /** E-mail addresses by user id, for the ids that are user ids (`cli:…` and `system:…` actors are not). */
  private async emailsOf(ids: string[]): Promise<Record<string, string>> {
    const userIds = [...new Set(ids.filter((id) => UUID.test(id)))];
    if (userIds.length === 0) return {};
    const users = await this.em.fork().find(User, { id: { $in: userIds } }, { fields: ['id', 'email'] });
    return Object.fromEntries(users.map((user) => [user.id, user.email]));
  }
}
