import { UnavailableError } from '../errors.ts';
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/** One AES-256 key of the keyring, named by the id every ciphertext made with it records. */
export interface SecretKey {
  readonly id: string;
  readonly key: Buffer;
}

/** The configuration could not be turned into a keyring (bad format, wrong key length). */
export class KeyringError extends Error {
  override name = 'KeyringError';
}

/**
 * A stored secret cannot be opened: it names a key we do not hold, it was tampered with, or it is
 * not one of our ciphertexts. Never answered with garbage: GCM's tag decides.
 */
export class SecretDecryptionError extends Error {
  override name = 'SecretDecryptionError';
}

const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/;
const FORMAT = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * Parses a keyring written as `id:base64key[,id:base64key…]`: the first key encrypts, every key
 * decrypts. Keys are 32 random bytes in base64 or base64url (`openssl rand -base64 32`).
 */
export function parseKeyring(text: string): SecretKey[] {
  const keys: SecretKey[] = [];
  for (const entry of text.split(/[,\n]/).map((s) => s.trim()).filter(Boolean)) {
    const colon = entry.indexOf(':');
    const id = colon > 0 ? entry.slice(0, colon) : '';
    if (!KEY_ID.test(id)) throw new KeyringError('each key must be written as <id>:<base64 key>, the id 1-32 of A-Z a-z 0-9 _ -');
    const key = Buffer.from(entry.slice(colon + 1), 'base64');
    if (key.length !== 32) throw new KeyringError(`key "${id}" must be 32 bytes (base64 of 32 random bytes)`);
    if (keys.some((k) => k.id === id)) throw new KeyringError(`key id "${id}" appears twice`);
    keys.push({ id, key });
  }
  if (keys.length === 0) throw new KeyringError('no key given');
  return keys;
}

/**
 * The embedded default's keyring: one key kept in `<dataDir>/secrets.key` (owner-only), created
 * on first use. The file is written under a temporary name and linked into place, so concurrent
 * first starts agree on one key and nobody ever reads a half-written file.
 */
export function loadOrCreateKeyFile(dataDir: string): SecretKey[] {
  const file = path.join(dataDir, 'secrets.key');
  try {
    return parseKeyring(fs.readFileSync(file, 'utf8'));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  // Traversable (not 0700): the embedded PostgreSQL, running as the "postgres" user when we are
  // root, keeps its cluster in DATA_DIR too. The key file itself is owner-only.
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o755 });
  const id = `local-${Date.now().toString(36)}`;
  const temporary = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
  const fd = fs.openSync(temporary, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o600);
  try {
    fs.writeSync(fd, `${id}:${randomBytes(32).toString('base64')}\n`);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  try {
    fs.linkSync(temporary, file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    fs.unlinkSync(temporary);
  }
  return parseKeyring(fs.readFileSync(file, 'utf8'));
}

/**
 * Authenticated encryption of the secrets we must be able to read back (a workspace's webhook
 * secret and API key): AES-256-GCM from Node's crypto, a fresh random 96-bit IV per secret.
 * A ciphertext is `v1:<keyId>:<iv>:<tag>:<ciphertext>` (base64url parts); the key id lets an old
 * key stay readable after a new one takes over encryption. The AAD binds a ciphertext to its
 * purpose (for example `workspace:webhook_secret`), so one column's value cannot be moved to another.
 */
/**
 * A secret made with a key this process does not hold (another instance re-sealed it under a newer
 * key): a 503 with a clear detail, never a 500. At start-up `missingKeyIds` refuses to run instead.
 */
export class SecretKeyMissingError extends UnavailableError {
  override name = 'SecretKeyMissingError';
  constructor(readonly keyId: string) {
    super(`The workspace's secret is encrypted with key "${keyId}", which this server's SECRETS_ENCRYPTION_KEYS does not hold; retry later.`);
  }
}

export class SecretBox {
  private readonly byId: ReadonlyMap<string, Buffer>;

  constructor(private readonly keys: readonly SecretKey[]) {
    if (keys.length === 0) throw new KeyringError('no key given');
    this.byId = new Map(keys.map((k) => [k.id, k.key]));
  }

  /** Id of the key new ciphertexts are made with. */
  get currentKeyId(): string {
    return this.keys[0]!.id;
  }

  encrypt(plaintext: string, purpose: string): string {
    const { id, key } = this.keys[0]!;
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(Buffer.from(purpose, 'utf8'));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    const parts = [iv, cipher.getAuthTag(), body].map((b) => b.toString('base64url'));
    return [FORMAT, id, ...parts].join(':');
  }

  decrypt(ciphertext: string, purpose: string): string {
    const parts = ciphertext.split(':');
    if (parts.length !== 5 || parts[0] !== FORMAT) throw new SecretDecryptionError('not a v1 secret ciphertext');
    const [, id, ivText, tagText, bodyText] = parts as [string, string, string, string, string];
    const key = this.byId.get(id);
    if (!key) throw new SecretKeyMissingError(id);
    const iv = Buffer.from(ivText, 'base64url');
    const tag = Buffer.from(tagText, 'base64url');
    if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES) throw new SecretDecryptionError('malformed secret ciphertext');
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
      decipher.setAAD(Buffer.from(purpose, 'utf8'));
      decipher.setAuthTag(tag);
      return Buffer.concat([decipher.update(Buffer.from(bodyText, 'base64url')), decipher.final()]).toString('utf8');
    } catch {
      throw new SecretDecryptionError(`the secret does not authenticate under key "${id}" (tampered, or a different key with that id)`);
    }
  }

  /** The key ids among `ids` that this keyring does not hold. */
  missingKeyIds(ids: Iterable<string>): string[] {
    return [...new Set(ids)].filter((id) => !this.byId.has(id)).sort();
  }

  /** Id of the key a ciphertext names, without decrypting it. */
  static keyIdOf(ciphertext: string): string | undefined {
    const parts = ciphertext.split(':');
    return parts.length === 5 && parts[0] === FORMAT ? parts[1] : undefined;
  }
}
