import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../../generated/openapi.ts';
import { recordAudit, type AuditActor } from '../audit/audit-service.ts';
import { NotFoundError } from '../errors.ts';
import * as queries from './administration-queries.ts';

type Schemas = components['schemas'];

/**
 * The instance's super admins over organizations: list them, see their members, suspend and resume
 * (docs/administration.md). A suspension is read by the authenticator, so it takes effect within
 * `CREDENTIAL_CACHE_TTL_MS` as a user's does.
 */
export class OrganizationAdministration {
  constructor(private readonly em: EntityManager) {}

  /** One page of organizations by name; `q` matches part of the name in any case. */
  async list(query: { q?: string; limit: number; offset: number }): Promise<Schemas['AdminOrganizationPage']> {
    const q = query.q?.trim() || undefined;
    const rows = await queries.organizationSummaries(this.em, q, query.limit, query.offset);
    const total = rows.length > 0 ? Number(rows[0]!.total) : query.offset > 0 ? await queries.organizationCount(this.em, q) : 0;
    return { items: rows.map(toAdminOrganizationView), total, limit: query.limit, offset: query.offset };
  }

  /** One organization with its members; unknown → 404. */
  async get(orgId: string): Promise<Schemas['AdminOrganizationDetail']> {
    const row = await queries.organizationSummary(this.em, orgId);
    if (!row) throw new NotFoundError('Organization not found');
    const members = await queries.organizationMembers(this.em, orgId);
    return {
      ...toAdminOrganizationView(row),
      members: members.map((m) => ({ user_id: m.user_id, email: m.email, role: m.role, joined_at: new Date(m.created_at).toISOString() })),
    };
  }

  /** Suspends or resumes it, with its audit row; doing it again changes nothing (and audits nothing). */
  async setSuspended(actor: AuditActor, orgId: string, suspended: boolean): Promise<Schemas['AdminOrganization']> {
    return this.em.fork().transactional(async (em) => {
      const result = await queries.setOrganizationSuspended(em, orgId, suspended);
      if (!result) throw new NotFoundError('Organization not found');
      if (result.wasSuspended !== suspended) {
        await recordAudit(em, {
          actor,
          action: suspended ? 'organization.suspended' : 'organization.resumed',
          targetType: 'organization',
          targetId: orgId,
          summary: { name: result.name },
          orgId,
        });
      }
      return toAdminOrganizationView((await queries.organizationSummary(em, orgId))!);
    });
  }
}

function toAdminOrganizationView(row: queries.OrganizationSummaryRow): Schemas['AdminOrganization'] {
  return {
    org_id: row.id,
    name: row.name,
    personal: row.personal,
    suspended: row.suspended,
    member_count: Number(row.member_count),
    created_at: new Date(row.created_at).toISOString(),
  };
}
