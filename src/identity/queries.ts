import type { EntityManager } from '@mikro-orm/postgresql';
import { sqlRows, sqlRun } from '../db/sql.ts';

/** Identity's raw SQL (users and credentials are entities): the user list, locks, credential checks. */

/** A row as the driver returns it: counts (bigint) and timestamps arrive as strings. */
export interface UserSummaryRow {
  id: string;
  email: string;
  is_super_admin: boolean;
  suspended: boolean;
  created_at: string;
  active_access_tokens: string;
  active_session_api_keys: string;
  last_used_at: string | null;
  total: string;
}

/** Which users a list shows: one by id, those whose e-mail holds `emailPart` (any case: e-mails are stored lower case), or all. */
export type UserFilter = { userId: string } | { emailPart: string } | Record<string, never>;

function whereOf(filter: UserFilter): { where: string; values: unknown[] } {
  if ('userId' in filter) return { where: 'where u.id = $1', values: [filter.userId] };
  if ('emailPart' in filter) return { where: `where u.email like $1 escape '\\'`, values: [`%${filter.emailPart.replace(/[\\%_]/g, (c) => `\\${c}`)}%`] };
  return { where: '', values: [] };
}

/** One page of users by e-mail with their active credential counts and the filter's total (a window count). */
export function userSummaries(em: EntityManager, filter: UserFilter, limit: number, offset: number): Promise<UserSummaryRow[]> {
  const { where, values } = whereOf(filter);
  return sqlRows<UserSummaryRow>(
    em,
    `select u.id, u.email, u.is_super_admin, u.suspended_at is not null as suspended, u.created_at,
       count(c.id) filter (where c.kind = 'access_token' and c.revoked_at is null) as active_access_tokens,
       count(c.id) filter (where c.kind = 'session_api_key' and c.revoked_at is null) as active_session_api_keys,
       max(c.last_used_at) as last_used_at,
       count(*) over () as total
     from users u left join credentials c on c.user_id = u.id
     ${where}
     group by u.id
     order by u.email
     limit $${values.length + 1} offset $${values.length + 2}`,
    [...values, limit, offset],
  );
}

/** Users matching a filter, for a page past the last one (where the window count has no row to ride on). */
export async function userCount(em: EntityManager, filter: UserFilter): Promise<number> {
  const { where, values } = whereOf(filter);
  const [row] = await sqlRows<{ n: string }>(em, `select count(*) as n from users u ${where}`, values);
  return Number(row!.n);
}

/** Takes a transaction-scoped advisory lock (`em` in a transaction). */
export async function lockForTransaction(em: EntityManager, lockId: number): Promise<void> {
  await sqlRows(em, 'select pg_advisory_xact_lock($1)', [lockId]);
}

/**
 * Of the pairs (credential, organization it acts in), those whose credential is not revoked or expired, whose
 * user is not suspended, and whose organization is not suspended and has the user as a member (or they are a
 * super admin).
 */
export function validCallers(em: EntityManager, credentialIds: readonly string[], orgIds: readonly string[]): Promise<{ credential_id: string; org_id: string }[]> {
  return sqlRows<{ credential_id: string; org_id: string }>(
    em,
    `select x.credential_id, x.org_id
       from unnest($1::uuid[], $2::uuid[]) as x (credential_id, org_id)
       join credentials c on c.id = x.credential_id
       join users u on u.id = c.user_id
       join organizations o on o.id = x.org_id
      where c.revoked_at is null and (c.expires_at is null or c.expires_at > now()) and u.suspended_at is null
        and o.suspended_at is null
        and (u.is_super_admin or exists (select 1 from organization_members m where m.org_id = x.org_id and m.user_id = u.id))`,
    [credentialIds, orgIds],
  );
}

export async function touchCredential(em: EntityManager, credentialId: string): Promise<void> {
  await sqlRun(em, 'update credentials set last_used_at = now() where id = $1', [credentialId]);
}
