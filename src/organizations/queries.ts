import type { EntityManager } from '@mikro-orm/postgresql';
import { sqlRows } from '../db/sql.ts';
import type { OrgRole } from './roles.ts';

/** A user's place in one organization. */
export interface Membership {
  readonly orgId: string;
  readonly role: OrgRole;
  readonly suspended: boolean;
}

/**
 * The user's role in `orgId` and whether it is suspended; undefined when they are not a member or it does not
 * exist. A super admin who is not a member acts there as an owner.
 */
export async function membershipOf(em: EntityManager, userId: string, orgId: string, isSuperAdmin: boolean): Promise<Membership | undefined> {
  const [row] = await sqlRows<{ role: OrgRole | null; suspended: boolean }>(
    em,
    `select m.role, o.suspended_at is not null as suspended
       from organizations o left join organization_members m on m.org_id = o.id and m.user_id = $2
      where o.id = $1`,
    [orgId, userId],
  );
  if (!row || (!row.role && !isSuperAdmin)) return undefined;
  return { orgId, role: row.role ?? 'owner', suspended: row.suspended };
}

/** Where a user acts without `X-Org-Id`: their chosen default organization while they belong to it, else their personal one. */
export async function defaultMembership(em: EntityManager, userId: string): Promise<Membership> {
  const [row] = await sqlRows<{ org_id: string; role: OrgRole; suspended: boolean }>(
    em,
    `select m.org_id, m.role, o.suspended_at is not null as suspended
       from users u
       join organization_members m on m.user_id = u.id and m.org_id in (coalesce(u.default_org_id, u.id), u.id)
       join organizations o on o.id = m.org_id
      where u.id = $1
      order by m.org_id = coalesce(u.default_org_id, u.id) desc
      limit 1`,
    [userId],
  );
  // Every user has a personal organization (a trigger makes it with the user).
  return row ? { orgId: row.org_id, role: row.role, suspended: row.suspended } : { orgId: userId, role: 'owner', suspended: false };
}
