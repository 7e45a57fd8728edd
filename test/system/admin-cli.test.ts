import { spawn } from 'node:child_process';
import os from 'node:os';
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { postEvents } from '../helpers/webhook.ts';
import { runAdmin } from '../../scripts/lib/admin-cli.ts';

interface CliRun {
  code: number | null;
  /** The last line of standard output, parsed: the command's result or `{error}`. */
  result: Record<string, unknown>;
  stdout: string;
  stderr: string;
}

function cliRun(code: number | null, stdout: string, stderr: string): CliRun {
  const lastLine = stdout.trimEnd().split('\n').pop() ?? '';
  try {
    return { code, result: JSON.parse(lastLine) as Record<string, unknown>, stdout, stderr };
  } catch {
    throw new Error(`the last line of stdout is not JSON: ${JSON.stringify(stdout)}; stderr: ${stderr}`);
  }
}

/** Runs the admin CLI on the test database in this process (a Node process per run took about 2 s). */
async function admin(...args: string[]): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  const write = (text: string) => (stderr += text);
  const code = await runAdmin(args, {
    env: { ...process.env, DATABASE_URL: testDatabase().url },
    stdout: (text) => (stdout += text),
    stderr: write,
    log: { write },
  });
  return cliRun(code, stdout, stderr);
}

/** Runs `npm run admin -- <args>` as it is run, a process of its own (without npm). */
function adminProcess(...args: string[]): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/admin.ts', ...args], {
      env: { ...process.env, DATABASE_URL: testDatabase().url },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code) => {
      try {
        resolve(cliRun(code, stdout, stderr));
      } catch (error) {
        reject(error);
      }
    });
  });
}

/** Expects a failed run: exit `code`, `{"error": ...}` on stdout, the same message on stderr. */
function expectFailure(run: CliRun, code: number, message: RegExp): void {
  expect(run.code, run.stderr).to.equal(code);
  expect(run.result).to.have.all.keys('error');
  expect(run.result.error).to.match(message);
  expect(run.stderr).to.include(run.result.error as string);
}

describe('npm run admin -- <command>', function () {
  this.timeout(60_000);
  let client: TestApp;
  before(async () => {
    client = await createTestApp();
  });

  const superAdminsAs = (token: string) => client.request.get('/api/admin/super-admins').set('X-Access-Token', token);

  describe('create-user', () => {
    it('prints {user_id, email, access_token}; the token works against the API', async () => {
      const run = await admin('create-user', '--email', '  Root@Example.COM ', '--super-admin');
      expect(run.code, run.stderr).to.equal(0);
      expect(run.result).to.have.all.keys('user_id', 'email', 'access_token');
      expect(run.result.email).to.equal('root@example.com');
      const response = await superAdminsAs(run.result.access_token as string).expect(200);
      expect(response.body.super_admins).to.deep.equal([{ user_id: run.result.user_id, email: 'root@example.com' }]);
    });

    it('creates a user without permissions unless --super-admin is given', async () => {
      const run = await admin('create-user', '--email', 'member@example.com');
      expect(run.code, run.stderr).to.equal(0);
      await superAdminsAs(run.result.access_token as string).expect(403);
    });

    it('exits 1 with {error} when the e-mail is taken, in any letter case', async () => {
      await createUserFixture({ email: 'taken@example.com' });
      expectFailure(await admin('create-user', '--email', 'Taken@Example.com'), 1, /already exists/);
    });

    it('exits 2 with {error} for a malformed e-mail or a missing --email', async () => {
      const [malformed, missing] = await Promise.all([admin('create-user', '--email', 'not-an-address'), admin('create-user')]);
      expectFailure(malformed, 2, /not a valid e-mail address/);
      expectFailure(missing, 2, /needs --email/);
    });
  });

  describe('create-token and create-session-key', () => {
    it('create-token prints another working access token', async () => {
      const user = await createUserFixture({ superAdmin: true });
      const run = await admin('create-token', '--email', user.email);
      expect(run.code, run.stderr).to.equal(0);
      expect(run.result).to.deep.equal({ access_token: run.result.access_token, user_id: user.userId });
      await superAdminsAs(run.result.access_token as string).expect(200);
      await superAdminsAs(user.accessToken).expect(200);
    });

    it('create-session-key prints {session_api_key, user_id}; the key is accepted by the webhook', async () => {
      const user = await createUserFixture();
      const run = await admin('create-session-key', '--email', user.email);
      expect(run.code, run.stderr).to.equal(0);
      expect(Object.keys(run.result)).to.deep.equal(['session_api_key', 'user_id']);
      expect(run.result.user_id).to.equal(user.userId);
      await postEvents(client, run.result.session_api_key as string, randomUUID(), [minimalEvent('PauseEvent')]).expect(200);
    });

    it('exits 1 with {error} for an unknown e-mail', async () => {
      const runs = await Promise.all([
        admin('create-token', '--email', 'nobody@example.com'),
        admin('create-session-key', '--email', 'nobody@example.com'),
      ]);
      for (const run of runs) expectFailure(run, 1, /No user has the e-mail nobody@example.com/);
    });
  });

  describe('revoke', () => {
    it('revokes an access token: it gets 401 afterwards, the user’s other token still works', async () => {
      const user = await createUserFixture({ superAdmin: true });
      const issued = await admin('create-token', '--email', user.email);
      const token = issued.result.access_token as string;
      const run = await admin('revoke', '--token', token);
      expect(run.code, run.stderr).to.equal(0);
      expect(run.result).to.include({ revoked: 'access_token', user_id: user.userId });
      expect(run.stdout + run.stderr).to.not.include(token);
      await superAdminsAs(token).expect(401);
      await superAdminsAs(user.accessToken).expect(200);
    });

    it('revokes a session API key: the webhook answers 401 afterwards', async () => {
      const user = await createUserFixture();
      const run = await admin('revoke', '--token', user.sessionApiKey);
      expect(run.code, run.stderr).to.equal(0);
      expect(run.result).to.include({ revoked: 'session_api_key', user_id: user.userId });
      await postEvents(client, user.sessionApiKey, randomUUID(), [minimalEvent('PauseEvent')]).expect(401);
    });

    it('exits 1 for an unknown token and 2 for something that is not a token or for a missing --token', async () => {
      const [unknown, notAToken, missing] = await Promise.all([
        admin('revoke', '--token', 'apat_unknown'),
        admin('revoke', '--token', 'hunter2'),
        admin('revoke'),
      ]);
      expectFailure(unknown, 1, /No access token matches/);
      expectFailure(notAToken, 2, /neither an access token nor a session API key/);
      expectFailure(missing, 2, /needs --token/);
    });
  });

  describe('grant-super-admin and revoke-super-admin', () => {
    it('grant-super-admin gives a user MANAGE_SUPER_ADMINS', async () => {
      const user = await createUserFixture();
      await superAdminsAs(user.accessToken).expect(403);
      const run = await admin('grant-super-admin', '--email', user.email);
      expect(run.code, run.stderr).to.equal(0);
      expect(run.result).to.deep.equal({ user_id: user.userId, email: user.email, is_super_admin: true });
      await superAdminsAs(user.accessToken).expect(200);
    });

    it('revoke-super-admin takes the rights away while another super admin remains', async () => {
      const first = await createUserFixture({ superAdmin: true });
      const second = await createUserFixture({ superAdmin: true });
      const run = await admin('revoke-super-admin', '--email', second.email);
      expect(run.code, run.stderr).to.equal(0);
      expect(run.result).to.deep.equal({ user_id: second.userId, email: second.email, is_super_admin: false });
      await superAdminsAs(second.accessToken).expect(403);
      await superAdminsAs(first.accessToken).expect(200);
    });

    it('revoke-super-admin refuses to remove the last super admin (exit 1)', async () => {
      const last = await createUserFixture({ superAdmin: true });
      expectFailure(await admin('revoke-super-admin', '--email', last.email), 1, /last super admin/);
      await superAdminsAs(last.accessToken).expect(200);
    });

    it('exits 1 with {error} for an unknown e-mail', async () => {
      await createUserFixture({ superAdmin: true });
      const runs = await Promise.all([
        admin('grant-super-admin', '--email', 'nobody@example.com'),
        admin('revoke-super-admin', '--email', 'nobody@example.com'),
      ]);
      for (const run of runs) expectFailure(run, 1, /No user has the e-mail nobody@example.com/);
    });
  });

  describe('list-users', () => {
    it('lists every user by e-mail with active credential counts, without any secret or hash', async () => {
      const bob = await createUserFixture({ email: 'bob@example.com' });
      const alice = await createUserFixture({ email: 'alice@example.com', superAdmin: true });
      await admin('revoke', '--token', bob.sessionApiKey);
      await superAdminsAs(alice.accessToken).expect(200);

      const run = await admin('list-users');
      expect(run.code, run.stderr).to.equal(0);
      const users = run.result.users as Record<string, unknown>[];
      expect(users.map(({ created_at: _created, last_used_at: _used, ...rest }) => rest)).to.deep.equal([
        {
          user_id: alice.userId,
          email: 'alice@example.com',
          is_super_admin: true,
          active_access_tokens: 1,
          active_session_api_keys: 1,
        },
        { user_id: bob.userId, email: 'bob@example.com', is_super_admin: false, active_access_tokens: 1, active_session_api_keys: 0 },
      ]);
      expect(users[1]!.last_used_at).to.equal(null);

      const hashes = await testDatabase().orm.em.getConnection().execute<{ secret_hash: string }[]>('select secret_hash from credentials');
      for (const secret of [alice.accessToken, alice.sessionApiKey, bob.accessToken, bob.sessionApiKey, ...hashes.map((h) => h.secret_hash)]) {
        expect(run.stdout + run.stderr).to.not.include(secret);
      }
    });
  });

  describe('suspend-user and resume-user', () => {
    it('suspend-user refuses every credential of the user; resume-user restores them', async () => {
      await createUserFixture({ superAdmin: true });
      const user = await createUserFixture();
      const suspended = await admin('suspend-user', '--email', user.email);
      expect(suspended.code, suspended.stderr).to.equal(0);
      expect(suspended.result).to.deep.equal({ user_id: user.userId, email: user.email, is_super_admin: false, suspended: true });
      await client.request.get('/api/me').set('X-Access-Token', user.accessToken).expect(401);
      const resumed = await admin('resume-user', '--email', user.email);
      expect(resumed.result).to.include({ suspended: false });
      await client.request.get('/api/me').set('X-Access-Token', user.accessToken).expect(200);
    });

    it('suspend-user refuses the last super admin (exit 1)', async () => {
      const last = await createUserFixture({ superAdmin: true });
      expectFailure(await admin('suspend-user', '--email', last.email), 1, /last super admin/);
    });
  });

  describe('audit', () => {
    it('every change the CLI makes is audited as cli:<os user>, without the secret it issued', async () => {
      const created = await admin('create-user', '--email', 'grace@example.com', '--super-admin');
      const token = await admin('create-token', '--email', 'grace@example.com', '--name', 'laptop', '--expires-in-days', '7');
      await admin('revoke', '--token', token.result.access_token as string);
      const rows = await testDatabase()
        .orm.em.getConnection()
        .execute<{ actor: string; action: string; target_type: string; request_id: string | null; summary: Record<string, unknown> }[]>(
          'select actor, action, target_type, request_id, summary from audit_log order by id',
        );
      expect(rows.map((r) => [r.actor, r.action, r.target_type, r.request_id])).to.deep.equal([
        [`cli:${os.userInfo().username}`, 'user.created', 'user', null],
        [`cli:${os.userInfo().username}`, 'key.created', 'key', null],
        [`cli:${os.userInfo().username}`, 'key.created', 'key', null],
        [`cli:${os.userInfo().username}`, 'key.revoked', 'key', null],
      ]);
      expect(rows[2]!.summary).to.include({ user_id: created.result.user_id, kind: 'access_token', name: 'laptop' });
      const text = JSON.stringify(rows);
      expect(text).to.not.include(created.result.access_token as string).and.not.include(token.result.access_token as string);
    });
  });

  describe('command line', () => {
    it('exits 2 with {error} and the usage for an unknown command, an unknown option or no command', async () => {
      const runs = await Promise.all([admin('frobnicate'), admin('list-users', '--email', 'a@example.com'), admin()]);
      expectFailure(runs[0]!, 2, /unknown command "frobnicate"/);
      expectFailure(runs[1]!, 2, /Unknown option '--email'/);
      expectFailure(runs[2]!, 2, /no command given/);
      for (const run of runs) expect(run.stderr).to.include('usage: npm run admin -- <command>');
    });

    it('help prints the usage and {commands}', async () => {
      const run = await admin('help');
      expect(run.code).to.equal(0);
      expect(run.result.commands).to.include.members([
        'create-user',
        'create-token',
        'create-session-key',
        'revoke',
        'grant-super-admin',
        'revoke-super-admin',
        'list-users',
      ]);
      expect(run.stderr).to.include('usage:');
    });

    it('as a process of its own: the result on stdout\'s last line, the exit code, the error on stderr', async () => {
      const email = `process-${randomUUID()}@example.com`;
      const created = await adminProcess('create-user', '--email', email);
      expect(created.code, created.stderr).to.equal(0);
      expect(created.result.email).to.equal(email);
      expectFailure(await adminProcess('create-user', '--email', email), 1, /already/i);
      expectFailure(await adminProcess('frobnicate'), 2, /unknown command "frobnicate"/);
    });
  });
});
