import { randomUUID } from 'node:crypto';
import type { OrgRole } from '../../src/organizations/roles.ts';
import { testDatabase } from './hooks.ts';

/** Makes `userId` a member of `orgId` with `role`, straight in the database (as accepting an invitation would). */
export async function addOrganizationMember(orgId: string, userId: string, role: OrgRole): Promise<void> {
  await testDatabase()
    .orm.em.getConnection()
    .execute('insert into organization_members (org_id, user_id, role) values (?, ?, ?)', [orgId, userId, role]);
}

/** A new, non-personal organization owned by `ownerId`; returns its id. */
export async function createOrganizationFixture(ownerId: string, name = `team-${randomUUID().slice(0, 8)}`): Promise<string> {
  const orgId = randomUUID();
  await testDatabase().orm.em.getConnection().execute('insert into organizations (id, name) values (?, ?)', [orgId, name]);
  await addOrganizationMember(orgId, ownerId, 'owner');
  return orgId;
}
