import { AsyncLocalStorage } from 'node:async_hooks';

/** What every log line written while serving a request says about that request. */
export interface RequestLogContext {
  readonly requestId: string;
}

/**
 * The request being served, for the logger's mixin: services keep one logger for the process and
 * still tag their lines with the request that caused them, without a logger passed down each call.
 */
export const requestContext = new AsyncLocalStorage<RequestLogContext>();

/** The fields the logger adds to each line: the current request's id, or nothing outside a request. */
export function requestLogFields(): Partial<RequestLogContext> {
  return requestContext.getStore() ?? {};
}
