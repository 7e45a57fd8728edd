import { pino, type Logger } from 'pino';
import { requestLogFields } from './observability/request-context.ts';

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
    },
    destination,
  );
}
