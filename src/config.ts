import path from 'node:path';

/** Where the database comes from: a URL the operator gives us, or a PostgreSQL we run ourselves. */
export type DatabaseConfig = (
  | { readonly kind: 'url'; readonly url: string }
  | { readonly kind: 'embedded'; readonly dataDir: string; readonly port: number }
) & {
  /** Connections in the pool: concurrent webhook transactions, each waiting on its commit's flush. */
  readonly poolSize: number;
};

export interface Config {
  readonly port: number;
  readonly host: string;
  readonly database: DatabaseConfig;
  readonly dataDir: string;
  readonly logLevel: string;
  /** Largest accepted request body, in bytes; larger bodies get 413. */
  readonly bodyLimitBytes: number;
  /** Upper bound on the 422 error list, so a huge bad batch cannot produce a huge response. */
  readonly maxValidationErrors: number;
  /** How long a verified credential is trusted without asking the database again. */
  readonly credentialCacheTtlMs: number;
  /** Time given to in-flight requests on SIGTERM/SIGINT before the process gives up on them. */
  readonly shutdownGraceMs: number;

  // Reliability: connection and database timeouts (slow clients, unreachable database).
  /** The whole header block of a request must arrive within this time (slowloris headers). */
  readonly httpHeadersTimeoutMs: number;
  /** The whole request, headers and body, must arrive within this time (trickled bodies). */
  readonly httpRequestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this time. */
  readonly httpKeepAliveTimeoutMs: number;
  /** How long a request waits for a free database connection before it gets 503. */
  readonly dbAcquireTimeoutMs: number;
  /** Longest a single SQL statement may run (PostgreSQL statement_timeout) before the request gets 503. */
  readonly dbQueryTimeoutMs: number;
  /** Longest /readyz waits for the database before it answers 503. */
  readonly readinessTimeoutMs: number;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

type Env = Record<string, string | undefined>;

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/**
 * Reads and validates the configuration. This is the only place that reads `process.env`;
 * everything else receives the frozen result.
 */
export function loadConfig(env: Env = process.env): Config {
  const dataDir = path.resolve(env.DATA_DIR || '.data');
  const databaseUrl = env.DATABASE_URL?.trim();
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL must be a postgres:// or postgresql:// URL');
  }
  const logLevel = env.LOG_LEVEL || 'info';
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got "${logLevel}"`);
  }
  const poolSize = integer(env, 'DB_POOL_SIZE', 20, 1, 500);
  const database: DatabaseConfig = databaseUrl
    ? { kind: 'url', url: databaseUrl, poolSize }
    : { kind: 'embedded', dataDir, port: integer(env, 'EMBEDDED_PG_PORT', 54329, 1024, 65535), poolSize };

  return Object.freeze({
    port: integer(env, 'PORT', 3000, 0, 65535),
    host: env.HOST || '127.0.0.1',
    database,
    dataDir,
    logLevel,
    bodyLimitBytes: integer(env, 'BODY_LIMIT_BYTES', 10 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
    maxValidationErrors: integer(env, 'MAX_VALIDATION_ERRORS', 100, 1, 10_000),
    credentialCacheTtlMs: integer(env, 'CREDENTIAL_CACHE_TTL_MS', 5_000, 0, 3_600_000),
    shutdownGraceMs: integer(env, 'SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),

    // Reliability: connection and database timeouts.
    httpHeadersTimeoutMs: integer(env, 'HTTP_HEADERS_TIMEOUT_MS', 20_000, 100, 600_000),
    httpRequestTimeoutMs: integer(env, 'HTTP_REQUEST_TIMEOUT_MS', 120_000, 100, 3_600_000),
    httpKeepAliveTimeoutMs: integer(env, 'HTTP_KEEP_ALIVE_TIMEOUT_MS', 5_000, 100, 600_000),
    dbAcquireTimeoutMs: integer(env, 'DB_ACQUIRE_TIMEOUT_MS', 5_000, 100, 600_000),
    dbQueryTimeoutMs: integer(env, 'DB_QUERY_TIMEOUT_MS', 30_000, 100, 3_600_000),
    readinessTimeoutMs: integer(env, 'READINESS_TIMEOUT_MS', 1_000, 100, 60_000),
  });
}
