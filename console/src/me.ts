import { api, type Schemas } from './api.ts';
import { chooseOrg, chosenOrg, forgetChosenOrg } from './session.ts';

type Me = Schemas['Me'];

let loading: Promise<Me | undefined> | undefined;

/**
 * The signed-in user as `GET /api/me` describes them in the organization this tab acts in: their
 * organizations and what their role there allows. Asked once per sign-in or switch. An organization
 * chosen earlier that they no longer belong to (403) is forgotten: the tab falls back to their default.
 */
export function me(): Promise<Me | undefined> {
  loading ??= api.GET('/api/me').then(async ({ data, response }) => {
    if (data || response.status !== 403 || !chosenOrg()) return data;
    forgetChosenOrg();
    return (await api.GET('/api/me')).data;
  }, () => undefined);
  return loading;
}

/** Asks `/api/me` again next time (after a sign-in, a switch, joining or leaving an organization). */
export function forgetMe(): void {
  loading = undefined;
}

/** Whether the role in the organization acted in holds `permission` (what the console offers follows it). */
export function can(user: Me | undefined, permission: Schemas['OrgPermission']): boolean {
  return user?.org_permissions.includes(permission) ?? false;
}

/** Switches the tab to `orgId` and draws the page again. */
export function switchOrg(orgId: string): void {
  forgetMe();
  chooseOrg(orgId);
}
