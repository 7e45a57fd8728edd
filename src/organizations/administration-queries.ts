import type { EntityManager } from '@mikro-orm/postgresql';
import { sqlRows, type SqlRunner } from '../db/sql.ts';
import type { OrgRole } from './roles.ts';

/** The SQL of the instance's administration of organizations (`GET /api/admin/organizations`, suspension). */

/** An organization as the driver returns it (counts arrive as strings). */
export interface OrganizationSummaryRow {
  id: string;
  name: string;
  personal: boolean;
  suspended: boolean;
  member_count: string;
  created_at: Date;
  total: string;
}

export interface OrganizationMemberRow {
  user_id: string;
  email: string;
  role: OrgRole;
  created_at: Date;
}

const SUMMARY = `select o.id, o.name, o.personal, o.suspended_at is not null as suspended, o.created_at,
    (select count(*) from organization_members m where m.org_id = o.id) as member_count`;

/** One page of organizations by name (then id), with the filter's total (a window count); `namePart` matches any case. */
export function organizationSummaries(em: EntityManager, namePart: string | undefined, limit: number, offset: number): Promise<OrganizationSummaryRow[]> {
  const pattern = namePart === undefined ? null : `%${namePart.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  return sqlRows<OrganizationSummaryRow>(
    em,
    `${SUMMARY}, count(*) over () as total
       from organizations o
      where $1::text is null or lower(o.name) like $1 escape '\\'
      order by lower(o.name), o.id
      limit $2 offset $3`,
    [pattern, limit, offset],
  );
}

/** Organizations matching the filter, for a page past the last one (where the window count has no row to ride on). */
export async function organizationCount(em: EntityManager, namePart: string | undefined): Promise<number> {
  const pattern = namePart === undefined ? null : `%${namePart.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  const [row] = await sqlRows<{ n: string }>(em, `select count(*) as n from organizations o where $1::text is null or lower(o.name) like $1 escape '\\'`, [pattern]);
  return Number(row!.n);
}

/** One organization as the list shows it; undefined when there is none. */
export async function organizationSummary(on: SqlRunner, orgId: string): Promise<OrganizationSummaryRow | undefined> {
  const [row] = await sqlRows<OrganizationSummaryRow>(on, `${SUMMARY}, 1 as total from organizations o where o.id = $1`, [orgId]);
  return row;
}

/** Its members by e-mail. */
export function organizationMembers(em: EntityManager, orgId: string): Promise<OrganizationMemberRow[]> {
  return sqlRows<OrganizationMemberRow>(
    em,
    `select m.user_id, u.email, m.role, m.created_at
       from organization_members m join users u on u.id = m.user_id
      where m.org_id = $1
      order by u.email`,
    [orgId],
  );
}

/**
 * Sets or lifts the suspension (locking the row); answers whether it was suspended before, undefined when
 * there is no such organization.
 */
export async function setOrganizationSuspended(on: SqlRunner, orgId: string, suspended: boolean): Promise<{ wasSuspended: boolean; name: string } | undefined> {
  const [row] = await sqlRows<{ was_suspended: boolean; name: string }>(
    on,
    `with current as (select id, name, suspended_at is not null as was_suspended from organizations where id = $1 for update)
     update organizations o
        set suspended_at = case when $2 then coalesce(o.suspended_at, now()) else null end,
            updated_at = case when (o.suspended_at is not null) = $2 then o.updated_at else now() end
       from current
      where o.id = current.id
     returning current.was_suspended, current.name`,
    [orgId, suspended],
  );
  return row ? { wasSuspended: row.was_suspended, name: row.name } : undefined;
}
