import { spawn } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { KeyringError, SecretBox, SecretDecryptionError, SecretKeyMissingError, loadOrCreateKeyFile, parseKeyring, type SecretKey } from '../../src/crypto/secret-box.ts';
import { PURPOSE } from '../../src/workspaces/workspace-service.ts';
import { createTestApp } from '../helpers/app.ts';
import { createUserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { runAdmin } from '../../scripts/lib/admin-cli.ts';

const key = (id: string): SecretKey => ({ id, key: randomBytes(32) });
const asEnv = (...keys: SecretKey[]) => keys.map((k) => `${k.id}:${k.key.toString('base64')}`).join(',');

/** Flips one bit of the base64url part `index` (2 = iv, 3 = tag, 4 = ciphertext) of a v1 ciphertext. */
function tamper(ciphertext: string, index: number): string {
  const parts = ciphertext.split(':');
  const bytes = Buffer.from(parts[index]!, 'base64url');
  bytes[0]! ^= 1;
  parts[index] = bytes.toString('base64url');
  return parts.join(':');
}

describe('SecretBox (AES-256-GCM secrets at rest)', () => {
  it('round-trips a secret; each encryption uses a fresh IV; the ciphertext names its key', () => {
    const box = new SecretBox([key('k1')]);
    const a = box.encrypt('ATATT_secret ünïcode', 'p');
    const b = box.encrypt('ATATT_secret ünïcode', 'p');
    expect(a).not.to.equal(b);
    expect(a).to.match(/^v1:k1:[\w-]{16}:[\w-]{22}:[\w-]+$/);
    expect(a).not.to.include('ATATT');
    expect(box.decrypt(a, 'p')).to.equal('ATATT_secret ünïcode');
    expect(box.decrypt(b, 'p')).to.equal('ATATT_secret ünïcode');
  });

  it('refuses tampered IV, tag or ciphertext with SecretDecryptionError, never garbage', () => {
    const box = new SecretBox([key('k1')]);
    const sealed = box.encrypt('whsec_abc', 'p');
    for (const index of [2, 3, 4]) {
      expect(() => box.decrypt(tamper(sealed, index), 'p')).to.throw(SecretDecryptionError, /does not authenticate|malformed/);
    }
    expect(() => box.decrypt('plaintext', 'p')).to.throw(SecretDecryptionError, /not a v1/);
    expect(() => box.decrypt(sealed.replace(/:[\w-]+$/, ':'), 'p')).to.throw(SecretDecryptionError);
  });

  it('refuses a ciphertext moved to another purpose (column)', () => {
    const box = new SecretBox([key('k1')]);
    const sealed = box.encrypt('whsec_abc', PURPOSE.webhookSecret);
    expect(() => box.decrypt(sealed, PURPOSE.svcAccApiKey)).to.throw(SecretDecryptionError);
  });

  it('refuses a wrong key under the same id, and names a key it does not hold', () => {
    const sealed = new SecretBox([key('k1')]).encrypt('whsec_abc', 'p');
    expect(() => new SecretBox([key('k1')]).decrypt(sealed, 'p')).to.throw(SecretDecryptionError, /does not authenticate under key "k1"/);
    expect(() => new SecretBox([key('k2')]).decrypt(sealed, 'p')).to.throw(SecretKeyMissingError, /key "k1", which this server's SECRETS_ENCRYPTION_KEYS does not hold/);
  });

  it('after rotation (new key first) still opens old ciphertexts and seals new ones with the new key', () => {
    const k1 = key('k1');
    const k2 = key('k2');
    const old = new SecretBox([k1]).encrypt('whsec_old', 'p');
    const rotated = new SecretBox(parseKeyring(asEnv(k2, k1)));
    expect(rotated.currentKeyId).to.equal('k2');
    expect(rotated.decrypt(old, 'p')).to.equal('whsec_old');
    expect(SecretBox.keyIdOf(rotated.encrypt('whsec_new', 'p'))).to.equal('k2');
  });

  it('parses SECRETS_ENCRYPTION_KEYS strictly, without echoing key material', () => {
    expect(parseKeyring(` a:${randomBytes(32).toString('base64')} , b:${randomBytes(32).toString('base64url')}`).map((k) => k.id)).to.deep.equal(['a', 'b']);
    expect(() => parseKeyring('')).to.throw(KeyringError);
    expect(() => parseKeyring('nokey')).to.throw(KeyringError);
    expect(() => parseKeyring(`k1:${randomBytes(16).toString('base64')}`)).to.throw(KeyringError, /32 bytes/);
    const one = asEnv(key('k1'));
    expect(() => parseKeyring(`${one},${one}`)).to.throw(KeyringError, /twice/);
    const short = randomBytes(31).toString('base64');
    expect(() => loadConfig({ SECRETS_ENCRYPTION_KEYS: `k1:${short}` })).to.throw(ConfigError, /SECRETS_ENCRYPTION_KEYS/).that.satisfies(
      (error: Error) => !error.message.includes(short),
    );
    expect(loadConfig({ SECRETS_ENCRYPTION_KEYS: one }).secretsEncryptionKeys?.[0]?.id).to.equal('k1');
  });

  describe('the embedded default key file', () => {
    let dir: string;
    beforeEach(() => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'secret-box-'));
    });
    afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

    it('is created once, owner-only, and read back the same by later starts', () => {
      const first = loadOrCreateKeyFile(path.join(dir, 'data'));
      const file = path.join(dir, 'data', 'secrets.key');
      expect(fs.statSync(file).mode & 0o777).to.equal(0o600);
      // The file protects itself; the directory stays traversable, as the embedded PostgreSQL (run
      // as the "postgres" user when we are root) needs DATA_DIR to be.
      expect(fs.statSync(path.join(dir, 'data')).mode & 0o001).to.equal(0o001);
      const second = loadOrCreateKeyFile(path.join(dir, 'data'));
      expect(second).to.deep.equal(first);
      expect(fs.readdirSync(path.join(dir, 'data'))).to.deep.equal(['secrets.key']);
      const sealed = new SecretBox(first).encrypt('x', 'p');
      expect(new SecretBox(second).decrypt(sealed, 'p')).to.equal('x');
    });

    it('is the same key for processes starting at once', async function () {
      this.timeout(30_000);
      const script = `import { loadOrCreateKeyFile } from './src/crypto/secret-box.ts';
        process.stdout.write(loadOrCreateKeyFile(process.argv[1]).map((k) => k.id + ':' + k.key.toString('hex')).join());`;
      const run = () =>
        new Promise<string>((resolve, reject) => {
          const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script, dir]);
          let out = '';
          child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
          child.once('error', reject);
          child.once('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`exit ${code}`))));
        });
      const keys = await Promise.all([run(), run(), run(), run()]);
      expect(new Set(keys).size).to.equal(1);
      expect(keys[0]).to.match(/^local-\w+:[0-9a-f]{64}$/);
    });
  });
});

describe('rotating the encryption key of stored workspace secrets', function () {
  this.timeout(60_000);

  it('keeps secrets readable after a new key is put first, and reseal-secrets moves them to it', async () => {
    const k1 = key('k1');
    const k2 = key('k2');
    const user = await createUserFixture();
    const underK1 = await createTestApp({ secretsEncryptionKeys: [k1] });
    for (const name of ['one', 'two']) {
      await underK1.request
        .post('/integration/issuetracker/workspaces')
        .set('X-Access-Token', user.accessToken)
        .send({ workspace_name: name, webhook_secret: `whsec_${name}`, svc_acc_email: 'bot@acme.example', svc_acc_api_key: `key_${name}`, is_active: true })
        .expect(201);
    }
    const connection = testDatabase().orm.em.getConnection();
    const keyIds = async () =>
      (await connection.execute<{ w: string; k: string }[]>('select webhook_secret_ciphertext as w, svc_acc_api_key_ciphertext as k from workspaces order by id'))
        .flatMap((row) => [row.w, row.k])
        .map((c) => SecretBox.keyIdOf(c));
    expect(await keyIds()).to.deep.equal(['k1', 'k1', 'k1', 'k1']);

    const body = '{"webhookEvent":"jira:issue_created"}';
    const signed = (secret: string) => `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
    const deliver = (app: Awaited<ReturnType<typeof createTestApp>>, id: string) =>
      app.request
        .post('/integration/issuetracker/events/one')
        .set('Content-Type', 'application/json')
        .set('X-Hub-Signature', signed('whsec_one'))
        .set('X-Atlassian-Webhook-Identifier', id)
        .send(body);

    const rotated = await createTestApp({ secretsEncryptionKeys: [k2, k1] });
    await deliver(rotated, 'd1').expect(200);

    const run = { code: 0, stdout: '', stderr: '' };
    const toStderr = (text: string) => (run.stderr += text);
    run.code = await runAdmin(['reseal-secrets'], {
      env: { ...process.env, DATABASE_URL: testDatabase().url, SECRETS_ENCRYPTION_KEYS: asEnv(k2, k1) },
      stdout: (text) => (run.stdout += text),
      stderr: toStderr,
      log: { write: toStderr },
    });
    expect(run.code, run.stderr).to.equal(0);
    expect(JSON.parse(run.stdout.trim().split('\n').pop()!)).to.deep.equal({ workspaces: 2, resealed: 2, key_id: 'k2' });
    expect(await keyIds()).to.deep.equal(['k2', 'k2', 'k2', 'k2']);
    expect(run.stdout + run.stderr).not.to.include('whsec_').and.not.to.include('key_one');

    // The old key can now go: k2 alone opens everything.
    const onlyK2 = await createTestApp({ secretsEncryptionKeys: [k2] });
    await deliver(onlyK2, 'd2').expect(200);
    // And a server holding only the old key cannot: a 503 naming the key it lacks, never a 500.
    const onlyK1 = await createTestApp({ secretsEncryptionKeys: [k1] });
    const refused = await deliver(onlyK1, 'd3').expect(503);
    expect(refused.body).to.deep.equal({
      detail: `The workspace's secret is encrypted with key "k2", which this server's SECRETS_ENCRYPTION_KEYS does not hold; retry later.`,
    });
  });
});
