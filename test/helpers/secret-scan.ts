/**
 * Root hooks: every log line the suite's servers write (in-process apps built by `createTestApp`
 * and server processes started by `startServerProcess`) is kept, and at the end of the run scanned
 * for secrets. The run fails if any log line holds
 * - a value passed to `rememberSecret` (fixture tokens, webhook secrets, `encrypted_content`, …),
 * - anything shaped like one of our credentials (`apat_…`, `apsk_…`, stream tickets `apst_…`, with 43
 *   base64url characters; share-link tokens `apsh_…`),
 * - an `encrypted_content` with a value other than `[redacted]` or null.
 * Test output of the CLI (which prints the token it issued, by design) is not a log and not scanned.
 */
const remembered = new Set<string>();
const captured: { source: string; text: string }[] = [];
let capturedBytes = 0;
const MAX_CAPTURED_BYTES = 512 * 1024 * 1024;

/** A secret that must never appear in a log line. Short values (< 8 characters) are ignored. */
export function rememberSecret(value: string | undefined | null): void {
  if (value && value.length >= 8) remembered.add(value);
}

/** Keeps log output of `source` for the end-of-run scan. */
export function captureLog(source: string, text: string): void {
  if (capturedBytes > MAX_CAPTURED_BYTES) return;
  capturedBytes += text.length;
  captured.push({ source, text });
}

const CREDENTIAL_SHAPE = /\bap(?:at|sk|st|sh)_[A-Za-z0-9_-]{43}\b/;
const ENCRYPTED_CONTENT_VALUE = /encrypted_content\\?":\s*\\?"(?!\[redacted\])/;

export interface SecretFinding {
  source: string;
  what: string;
  line: string;
}

/** Every log line captured so far that reveals a secret. */
export function findSecretsInLogs(): SecretFinding[] {
  const findings: SecretFinding[] = [];
  for (const { source, text } of captured) {
    for (const line of text.split('\n')) {
      if (!line) continue;
      const shaped = CREDENTIAL_SHAPE.exec(line);
      if (shaped) findings.push({ source, what: 'a credential', line });
      else if (ENCRYPTED_CONTENT_VALUE.test(line)) findings.push({ source, what: 'encrypted_content', line });
      else {
        for (const secret of remembered) {
          if (line.includes(secret)) {
            findings.push({ source, what: `remembered secret ${secret.slice(0, 4)}…`, line });
            break;
          }
        }
      }
    }
  }
  return findings;
}

/** How much was scanned (for the report). */
export function capturedLogStats(): { lines: number; secrets: number } {
  return { lines: captured.reduce((n, c) => n + c.text.split('\n').length - 1, 0), secrets: remembered.size };
}

export const mochaHooks = {
  afterAll() {
    const findings = findSecretsInLogs();
    const { lines, secrets } = capturedLogStats();
    if (findings.length > 0) {
      const shown = findings
        .slice(0, 10)
        .map((f) => `  [${f.source}] ${f.what}: ${f.line.slice(0, 400)}`)
        .join('\n');
      throw new Error(`secret scan: ${findings.length} log line(s) reveal a secret:\n${shown}`);
    }
    console.log(`  secret scan: ${lines} log lines of the whole run, ${secrets} remembered secrets, none revealed`);
  },
};
