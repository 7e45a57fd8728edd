import { pino, type Logger } from 'pino';
import { requestLogFields } from './observability/request-context.ts';
import { PACKAGE_ROOT } from './package-root.ts';

export type { Logger };

/**
 * Payload fields whose values are secret wherever they appear: the encrypted reasoning of an LLM
 * response and the secrets of a workspace registration. Neither logs nor 422 bodies repeat them.
 */
export const SECRET_FIELDS = ['encrypted_content', 'reasoning_details', 'webhook_secret', 'svc_acc_api_key'];

/** Configuration fields holding the Stripe keys, wherever a config object might be logged. */
const SECRET_CONFIG_FIELDS = ['secretKey', 'webhookSecret'];

/** Paths that never reach a log line: credentials in headers and CLI output, and the secret fields. */
const REDACTED_PATHS = [
  'req.headers["x-access-token"]',
  'req.headers["x-session-api-key"]',
  'req.headers.authorization',
  'access_token',
  'session_api_key',
  'token',
  'req.headers["stripe-signature"]',
  ...[...SECRET_FIELDS, ...SECRET_CONFIG_FIELDS].flatMap((field) => [field, `*.${field}`, `*.*.${field}`]),
];

/** What a log line says about an error (`err`): see `errorLogFields`. */
export interface ErrorLogFields {
  type: string;
  code?: string | number;
  message?: string;
  /** PostgreSQL's names for where the error arose: identifiers of the schema, never data. */
  constraint?: string;
  table?: string;
  column?: string;
  /** Only at `LOG_LEVEL=debug`: the stack's frames, without the message line. */
  frames?: string[];
}

const MAX_MESSAGE_LENGTH = 300;

/** A database driver's error (pg / MikroORM): its message holds the SQL text and parameters. */
function isDriverError(error: Record<string, unknown>): boolean {
  return typeof error.code === 'string' && /^[0-9A-Z]{5}$/.test(error.code) && ('severity' in error || 'routine' in error || String(error.name).endsWith('Exception'));
}

/**
 * An error as a log line shows it, the same for every line that logs one (pino's `err`
 * serializer): its type, code and message — no stack frames, no SQL text, no request data. A
 * database error is named by its SQLSTATE and the constraint/table/column, as its message repeats
 * the statement and its values. At `LOG_LEVEL=debug` the stack's frames (never its message) are added.
 */
export function errorLogFields(error: unknown, withFrames = false): ErrorLogFields {
  if (!(error instanceof Error)) return { type: typeof error, message: String(error).slice(0, MAX_MESSAGE_LENGTH) };
  const record = error as unknown as Record<string, unknown>;
  const fields: ErrorLogFields = { type: error.name || error.constructor?.name || 'Error' };
  const code = record.code;
  if (typeof code === 'string' || typeof code === 'number') fields.code = code;
  if (isDriverError(record)) {
    for (const key of ['constraint', 'table', 'column'] as const) {
      if (typeof record[key] === 'string') fields[key] = record[key] as string;
    }
  } else {
    fields.message = error.message.length > MAX_MESSAGE_LENGTH ? `${error.message.slice(0, MAX_MESSAGE_LENGTH)}…` : error.message;
  }
  if (withFrames && typeof error.stack === 'string') {
    // Paths relative to the package: where in our code, not where it is installed.
    fields.frames = error.stack
      .split('\n')
      .filter((line) => /^\s+at /.test(line))
      .map((line) => line.trim().replaceAll(`file://${PACKAGE_ROOT}/`, '').replaceAll(`${PACKAGE_ROOT}/`, ''));
  }
  return fields;
}

/**
 * Creates the process logger; tests pass a destination to read what was logged. Every line written
 * while a request is served carries its `requestId` (see `src/observability/request-context.ts`).
 */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      base: undefined,
      timestamp: pino.stdTimeFunctions.isoTime,
      mixin: requestLogFields,
      serializers: { err: (error: unknown) => errorLogFields(error, level === 'debug' || level === 'trace') },
    },
    destination,
  );
}
