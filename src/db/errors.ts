/** PostgreSQL error classes that mean "the database cannot serve us right now", not "bad request". */
const UNAVAILABLE_SQLSTATE_PREFIXES = ['08', '53', '57P', '57014' /* statement_timeout: overloaded or stalled */];
const UNAVAILABLE_NODE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENOTFOUND']);

/** True when an error from the driver or pool means the database is unreachable or shutting down. */
export function isDatabaseUnavailable(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e && typeof e === 'object' && depth < 5; depth++) {
    const { code, message, name } = e as { code?: unknown; message?: unknown; name?: unknown };
    if (typeof code === 'string') {
      if (UNAVAILABLE_NODE_CODES.has(code)) return true;
      if (UNAVAILABLE_SQLSTATE_PREFIXES.some((prefix) => code.startsWith(prefix))) return true;
    }
    if (name === 'ConnectionException' || name === 'KnexTimeoutError') return true;
    if (typeof message === 'string' && /Connection terminated|Timeout acquiring a connection|connect ECONNREFUSED|Client has encountered a connection error|timeout expired|Query read timeout/.test(message)) {
      return true;
    }
    e = (e as { cause?: unknown; previous?: unknown }).previous ?? (e as { cause?: unknown }).cause;
  }
  return false;
}
