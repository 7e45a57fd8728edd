/** The access token of this tab: kept in sessionStorage only, cleared on sign-out. */

const KEY = 'console.accessToken';
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

/** Forgets the token; `reason` is the sentence the sign-in page shows next. */
export function signOut(reason?: string): void {
  sessionStorage.removeItem(KEY);
  signedOutReason = reason;
  for (const listener of listeners) listener();
}

/** Why the user was signed out (shown once on the sign-in page). */
export function takeSignedOutReason(): string | undefined {
  const reason = signedOutReason;
  signedOutReason = undefined;
  return reason;
}

export function onSessionChange(listener: () => void): void {
  listeners.add(listener);
}
