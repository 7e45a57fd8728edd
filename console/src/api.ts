import createClient, { type Middleware } from 'openapi-fetch';
import type { components, paths } from '../../generated/openapi.ts';
import { accessToken, chosenOrg, signOut } from './session.ts';

export type Schemas = components['schemas'];

/** Sends the tab's access token and the organization chosen in it; a 401 anywhere signs the user out with a sentence. */
const credentials: Middleware = {
  onRequest({ request }) {
    const token = accessToken();
    if (token && !request.headers.has('X-Access-Token')) request.headers.set('X-Access-Token', token);
    const org = chosenOrg();
    if (org && token) request.headers.set('X-Org-Id', org);
    return request;
  },
  onResponse({ response }) {
    if (response.status === 401 && accessToken()) {
      signOut('Your access token was not accepted (it may have been revoked or mistyped). Please sign in again.');
    }
    return response;
  },
};

/** The typed client of the API: paths, parameters and bodies come from `generated/openapi.ts`. */
export const api = createClient<paths>({ baseUrl: location.origin });
api.use(credentials);

/** A human sentence for an error body (`{detail}` as a string or FastAPI's list). */
export function describeError(error: unknown, status?: number): string {
  const detail = (error as { detail?: unknown } | undefined)?.detail;
  if (typeof detail === 'string') return detail;
  if (Array.isArray(detail)) {
    return detail.map((item: { loc?: unknown[]; msg?: string }) => `${(item.loc ?? []).slice(1).join('.')}: ${item.msg ?? ''}`).join('; ');
  }
  if (status === 403) return 'You do not have permission to see this.';
  if (status === 404) return 'Not found.';
  if (status && status >= 500) return 'The server could not answer; try again in a moment.';
  return 'Something went wrong.';
}
