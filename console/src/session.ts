/** The access token of this tab: kept in sessionStorage only, cleared on sign-out. */

const KEY = 'console.accessToken';
/** The organization the console acts in (sent as `X-Org-Id`); absent: the user's default. */
const ORG_KEY = 'console.orgId';
let signedOutReason: string | undefined;
const listeners = new Set<() => void>();

export function accessToken(): string | null {
  return sessionStorage.getItem(KEY);
}

export function signIn(token: string): void {
  sessionStorage.setItem(KEY, token.trim());
  signedOutReason = undefined;
  for (const listener of listeners) listener();
}

/** The organization chosen in this tab, if any. */
export function chosenOrg(): string | null {
  return sessionStorage.getItem(ORG_KEY);
}

/** Acts in `orgId` from now on in this tab (null: the user's default); every page is drawn again. */
export function chooseOrg(orgId: string | null): void {
  if (orgId) sessionStorage.setItem(ORG_KEY, orgId);
  else sessionStorage.removeItem(ORG_KEY);
  for (const listener of listeners) listener();
}

/** Forgets the organization chosen in this tab, without drawing again (it was not one of the user's any more). */
export function forgetChosenOrg(): void {
  sessionStorage.removeItem(ORG_KEY);
}

/** Forgets the token; `reason` is the sentence the sign-in page shows next. */
export function signOut(reason?: string): void {
  sessionStorage.removeItem(KEY);
  sessionStorage.removeItem(ORG_KEY);
  signedOutReason = reason;
  for (const listener of listeners) listener();
}

/** Why the user was signed out: kept until the next sign-in, so a later redraw of the sign-in page still says it. */
export function signedOutReasonText(): string | undefined {
  return signedOutReason;
}

export function onSessionChange(listener: () => void): void {
  listeners.add(listener);
}
