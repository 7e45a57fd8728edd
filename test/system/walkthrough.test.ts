import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { extractWalkthrough, MARKER, ROOT, runWalkthrough, type Walkthrough, type WalkthroughResult } from '../../scripts/walkthrough.ts';
import { captureLog, rememberSecret } from '../helpers/secret-scan.ts';

/**
 * The README's walkthrough is run as a newcomer would paste it, against a fresh `npm start` (its own
 * port and embedded PostgreSQL, or DATABASE_URL): so the README cannot rot. A broken copy shows that
 * the run stops at the first failing command and names it.
 */
const README = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');

/** What a failed assertion should show about a run. */
const describeResult = (result: WalkthroughResult) =>
  `exit ${result.code}, server exit ${result.serverExitCode}\n--- output ---\n${result.output.slice(-6000)}\n--- server log ---\n${result.serverLog.slice(-3000)}`;

/** The server's log goes to the end-of-run secret scan. */
const run = (walkthrough: Walkthrough) => runWalkthrough(walkthrough, { onServerLog: (text) => captureLog('walkthrough server', text) });

describe('README walkthrough (npm run walkthrough)', function () {
  this.timeout(240_000);

  it(`is the sh block after ${MARKER} and defines every variable it uses`, () => {
    const { script } = extractWalkthrough(README);
    const defined = new Set([...script.matchAll(/^\s*([A-Z][A-Z0-9_]*)=/gm)].map((m) => m[1]));
    const used = new Set([...script.matchAll(/\$\{?([A-Z][A-Z0-9_]*)/g)].map((m) => m[1]));
    expect([...used].filter((name) => !defined.has(name)), 'used but never defined').to.deep.equal([]);
    for (const name of ['ADMIN_TOKEN', 'TOKEN', 'KEY', 'CONV', 'BASE']) expect(defined, name).to.include(name);
  });

  it('refuses a README without the marked block', () => {
    expect(() => extractWalkthrough('# no walkthrough here\n```sh\necho hi\n```\n')).to.throw(/no "<!-- walkthrough -->" line/);
    expect(() => extractWalkthrough(`${MARKER}\ntext\n`)).to.throw(/not followed by a ```sh block/);
  });

  it('runs to the end against a fresh npm start, which then stops on SIGTERM leaving nothing running', async () => {
    const walkthrough = extractWalkthrough(README);
    // The workspace secrets it registers must not reach the server's log (end-of-run scan).
    for (const [, secret] of walkthrough.script.matchAll(/"(?:webhook_secret|svc_acc_api_key)": "([^"]+)"/g)) rememberSecret(secret);
    const result = await run(walkthrough);
    expect(result.code, describeResult(result)).to.equal(0);
    expect(result.failed).to.equal(undefined);
    // What each step shows a reader, end to end.
    expect(result.output).to.include('"email":"admin@example.com"');
    expect(result.output).to.match(/"seq":2,.*"ConversationStateUpdateEvent"/);
    expect(result.output, 'the delta arrives on the live stream').to.include('event: delta');
    expect(result.output).to.include('"balance_usd":25');
    expect(result.output).to.include('"name":"acme-engineering"');
    expect(result.output).to.include('"model_name":"claude-sonnet-4-5"');
    expect(result.serverLog, 'the start-up log named the first command to run').to.include('no user yet; create the first super admin');
    expect(result.serverExitCode, describeResult(result)).to.equal(0);
    expect(result.leftovers, 'processes left running').to.equal('');
  });

  it('stops at the first command that fails, names its README line and runs nothing after it', async () => {
    const walkthrough = extractWalkthrough(README);
    const lines = walkthrough.script.split('\n');
    const broken = lines.findIndex((line) => line.includes('"$BASE/api/billing/credits"'));
    expect(broken, 'the walkthrough reads the credits').to.be.greaterThan(0);
    lines[broken] = lines[broken]!.replace('/api/billing/credits', '/api/billing/credit');
    // Started outside any shell, as CI and test harnesses start it: no SHLVL. bash then took itself for a
    // remote shell, sourced /etc/bash.bashrc, and named README line "firstLine - 2" (scripts/walkthrough.ts).
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env.SHLVL;
    const result = await runWalkthrough({ ...walkthrough, script: lines.join('\n') }, { env, onServerLog: (text) => captureLog('walkthrough server', text) });

    expect(result.code, describeResult(result)).to.equal(22); // curl --fail-with-body: HTTP error
    expect(result.failed).to.equal(`README.md line ${walkthrough.firstLine + broken}: ${lines[broken]!.trim()}`);
    expect(result.output).to.include('No route for GET /api/billing/credit');
    expect(result.output, 'the steps before it ran').to.include('event: delta');
    expect(result.output, 'nothing after it ran').not.to.include('acme-engineering');
    expect(result.serverExitCode, describeResult(result)).to.equal(0);
    expect(result.leftovers, 'processes left running').to.equal('');
  });
});
