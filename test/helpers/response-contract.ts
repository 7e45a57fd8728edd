import Mocha from 'mocha';
import { VIOLATION_MARKER, describeViolation, violationSink, type ContractViolation } from '../../src/api/response-contract.ts';

/**
 * Root hooks: every response any test receives is checked against `spec/openapi.yaml` — from apps
 * built in this process (`testConfig()` sets `RESPONSE_VALIDATION=log`, so `app.callback()` checks
 * what it writes) and from the server processes tests start (`serverEnvironment` sets it; their
 * stderr is read by `server-process.ts`). A response the spec does not describe (undocumented
 * status, Content-Type or header, body invalid for its status) fails the test that got it, naming
 * the operation, the status and the schema error.
 * New operations are covered automatically: the checker routes by the spec's own paths, so adding
 * an operation to the spec (with every status it answers) is all it takes.
 */
const violations: ContractViolation[] = [];

violationSink.report = (violation) => {
  violations.push(violation);
};

/** Reads the violation lines of a server process's stderr (`chunk` may hold several or partial lines). */
export function serverOutputReader(): (chunk: string) => void {
  let pending = '';
  return (chunk) => {
    pending += chunk;
    const lines = pending.split('\n');
    pending = lines.pop()!;
    for (const line of lines) {
      const at = line.indexOf(VIOLATION_MARKER);
      if (at < 0) continue;
      try {
        violations.push(JSON.parse(line.slice(at + VIOLATION_MARKER.length)) as ContractViolation);
      } catch {
        // not one of ours
      }
    }
  };
}

/** Violations reported so far and not yet failed on (for tests of the checker itself). */
export function takeViolations(): ContractViolation[] {
  return violations.splice(0);
}

function violationError(found: ContractViolation[]): Error {
  const lines = [...new Set(found.map(describeViolation))];
  return new Error(`${lines.length} response(s) not described by spec/openapi.yaml:\n  ${lines.join('\n  ')}`);
}

// Mocha has no hook that can fail a test once it has run (a failing root afterEach would abort the
// whole run), so the test's own completion callback is where its responses are judged.
const run = Mocha.Runnable.prototype.run;
Mocha.Runnable.prototype.run = function (this: Mocha.Runnable, done: (error?: unknown) => void) {
  if ((this as unknown as { type?: string }).type !== 'test') return run.call(this, done);
  return run.call(this, (error?: unknown) => {
    const found = takeViolations();
    done(error ?? (found.length ? violationError(found) : undefined));
  });
};

export const mochaHooks = {
  // What arrives after the last test (a server process's late line) still fails the run.
  afterAll() {
    const found = takeViolations();
    if (found.length) throw violationError(found);
  },
};
