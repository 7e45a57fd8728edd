/**
 * The admin CLI (`scripts/admin.ts` runs it: `npm run admin -- <command> [options]`), on the database the configuration names
 * (`DATABASE_URL`, or the embedded PostgreSQL under `DATA_DIR`, shared with a running server).
 *
 * Output contract, for scripts: the last line of standard output is one JSON object, the result or
 * `{"error": "<message>"}`; the message is also written to standard error. Exit code 0 on success,
 * 1 when the request is refused (not found, conflict) or the database fails, 2 on bad usage or input.
 * Secrets appear only in the output of the command that issues them.
 */
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import type { MikroORM } from '@mikro-orm/postgresql';
import { ConfigError, loadConfig, type Config } from '../../src/config.ts';
import { openDatabase, type Database } from '../../src/db/database.ts';
import { DomainError, InvalidInputError } from '../../src/errors.ts';
import { IdentityService, type KeyRequest } from '../../src/identity/identity-service.ts';
import type { CredentialKind, User } from '../../src/identity/entities.ts';
import { cliActor, type AuditActor } from '../../src/audit/audit-service.ts';
import { createLogger } from '../../src/logger.ts';
import { createWorkspaceService } from '../../src/workspaces/setup.ts';

const OPTIONS = {
  email: { type: 'string' },
  token: { type: 'string' },
  name: { type: 'string' },
  'expires-in-days': { type: 'string' },
  'super-admin': { type: 'boolean' },
} as const;

type Flag = keyof typeof OPTIONS;
type Values = { email?: string; token?: string; name?: string; 'expires-in-days'?: string; 'super-admin'?: boolean };

interface Command {
  readonly usage: string;
  readonly required: readonly Flag[];
  readonly optional?: readonly Flag[];
  /** Runs with the parsed flags; the `required` ones are known to be present. */
  run(identity: IdentityService, values: Values, context: { orm: MikroORM; config: Config; actor: AuditActor }): Promise<object>;
}

/** `--name` and `--expires-in-days` of the commands that issue a key. */
function keyRequest(kind: CredentialKind, values: Values): KeyRequest {
  const raw = values['expires-in-days'];
  const days = raw === undefined ? undefined : Number(raw);
  if (days !== undefined && (!Number.isInteger(days) || days < 1 || days > 3650)) {
    throw new InvalidInputError('--expires-in-days must be an integer from 1 to 3650', ['expires-in-days'], 'value_error', raw);
  }
  const name = values.name?.trim();
  if (name !== undefined && (name.length === 0 || name.length > 100)) {
    throw new InvalidInputError('--name must be 1 to 100 characters', ['name'], 'value_error', values.name);
  }
  return { kind, name: name ?? null, expiresInDays: days };
}

/** A user as the CLI prints them. */
function userOutput(user: User): object {
  return { user_id: user.id, email: user.email, is_super_admin: user.isSuperAdmin, suspended: user.suspendedAt !== null };
}

const COMMANDS: Record<string, Command> = {
  'create-user': {
    usage: 'create-user --email E [--super-admin]   create a user and their first access token',
    required: ['email'],
    optional: ['super-admin'],
    async run(identity, values, { actor }) {
      const { user, key } = await identity.createUser(actor, values.email!, {
        superAdmin: values['super-admin'],
        firstKey: { kind: 'access_token' },
      });
      return { user_id: user.id, email: user.email, access_token: key!.secret };
    },
  },
  'create-token': {
    usage: 'create-token --email E [--name N] [--expires-in-days D]        issue another access token (X-Access-Token)',
    required: ['email'],
    optional: ['name', 'expires-in-days'],
    async run(identity, values, { actor }) {
      const { credential, secret } = await identity.issueKey(actor, { email: values.email! }, keyRequest('access_token', values));
      return { access_token: secret, user_id: credential.user.id };
    },
  },
  'create-session-key': {
    usage: 'create-session-key --email E [--name N] [--expires-in-days D]  issue a session API key (X-Session-API-Key) for an agent runtime',
    required: ['email'],
    optional: ['name', 'expires-in-days'],
    async run(identity, values, { actor }) {
      const { credential, secret } = await identity.issueKey(actor, { email: values.email! }, keyRequest('session_api_key', values));
      return { session_api_key: secret, user_id: credential.user.id };
    },
  },
  revoke: {
    usage: 'revoke --token T                        revoke an access token or a session API key',
    required: ['token'],
    async run(identity, values, { actor }) {
      const credential = await identity.revoke(actor, values.token!);
      return { revoked: credential.kind, user_id: credential.user.id, revoked_at: credential.revokedAt!.toISOString() };
    },
  },
  'grant-super-admin': {
    usage: 'grant-super-admin --email E             make a user a super admin',
    required: ['email'],
    async run(identity, values, { actor }) {
      const { user } = await identity.grantSuperAdmin(actor, { email: values.email! });
      return { user_id: user.id, email: user.email, is_super_admin: user.isSuperAdmin };
    },
  },
  'revoke-super-admin': {
    usage: 'revoke-super-admin --email E            take super-admin rights away (never from the last one)',
    required: ['email'],
    async run(identity, values, { actor }) {
      const user = await identity.revokeSuperAdmin(actor, { email: values.email! });
      return { user_id: user.id, email: user.email, is_super_admin: user.isSuperAdmin };
    },
  },
  'suspend-user': {
    usage: 'suspend-user --email E                  refuse every credential of a user (their data stays)',
    required: ['email'],
    async run(identity, values, { actor }) {
      return userOutput(await identity.suspendUser(actor, { email: values.email! }));
    },
  },
  'resume-user': {
    usage: 'resume-user --email E                   lift a suspension',
    required: ['email'],
    async run(identity, values, { actor }) {
      return userOutput(await identity.resumeUser(actor, { email: values.email! }));
    },
  },
  'list-users': {
    usage: 'list-users                              list users with their active credential counts',
    required: [],
    async run(identity) {
      const { users } = await identity.listUsers();
      return {
        users: users.map((user) => ({
          user_id: user.userId,
          email: user.email,
          is_super_admin: user.isSuperAdmin,
          created_at: user.createdAt.toISOString(),
          active_access_tokens: user.activeAccessTokens,
          active_session_api_keys: user.activeSessionApiKeys,
          last_used_at: user.lastUsedAt?.toISOString() ?? null,
        })),
      };
    },
  },
  'reseal-secrets': {
    usage: 'reseal-secrets                          re-encrypt workspace secrets under the first key of SECRETS_ENCRYPTION_KEYS',
    required: [],
    async run(_identity, _values, { orm, config, actor }) {
      const { workspaces, resealed, keyId } = await createWorkspaceService(config, orm.em).resealSecrets(actor);
      return { workspaces, resealed, key_id: keyId };
    },
  },
};

const USAGE = [
  'usage: npm run admin -- <command> [options]',
  '',
  ...Object.values(COMMANDS).map((command) => `  ${command.usage}`),
].join('\n');

/** Bad command line: reported with the usage text, exit code 2. */
class UsageError extends Error {}

function parseCommandLine(argv: string[]): { command: Command; values: Values } {
  const [name, ...rest] = argv;
  if (!name) throw new UsageError('no command given');
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!command) throw new UsageError(`unknown command "${name}"`);
  const flags = [...command.required, ...(command.optional ?? [])];
  let values: Values;
  try {
    ({ values } = parseArgs({
      args: rest,
      options: Object.fromEntries(flags.map((flag) => [flag, OPTIONS[flag]])),
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    throw new UsageError(`${name}: ${(error as Error).message}`);
  }
  for (const flag of command.required) {
    if (!values[flag]) throw new UsageError(`${name} needs --${flag}`);
  }
  return { command, values };
}

function exitCodeOf(error: unknown): number {
  return error instanceof UsageError || error instanceof InvalidInputError || error instanceof ConfigError ? 2 : 1;
}

function messageOf(error: unknown): string {
  if (error instanceof DomainError || error instanceof UsageError || error instanceof ConfigError) return error.message;
  // Anything else (database unreachable, file system) is unexpected: its own message helps diagnose it.
  return `failed: ${error instanceof Error ? error.message : String(error)}`;
}

/** Where a run reads its settings and writes: the process's own, or a test's. */
export interface AdminIo {
  env: NodeJS.ProcessEnv;
  stdout(text: string): void;
  stderr(text: string): void;
  /** The log's destination (standard error). */
  log: pino.DestinationStream;
}

/** Runs one command line; answers the exit code. */
export async function runAdmin(argv: string[], io: AdminIo): Promise<number> {
  const printResult = (result: object) => io.stdout(`${JSON.stringify(result)}\n`);
  if (argv[0] === 'help' || argv[0] === '--help' || argv[0] === '-h') {
    io.stderr(`${USAGE}\n`);
    printResult({ commands: Object.keys(COMMANDS) });
    return 0;
  }
  let database: Database | undefined;
  try {
    const { command, values } = parseCommandLine(argv);
    const config = loadConfig(io.env);
    // Standard output is reserved for the result, so the log goes to standard error.
    database = await openDatabase(config.database, createLogger('warn', io.log));
    // Every change the CLI makes is audited as `cli:<os user>`.
    printResult(await command.run(new IdentityService(database.orm.em), values, { orm: database.orm, config, actor: cliActor() }));
    return 0;
  } catch (error) {
    const message = messageOf(error);
    io.stderr(`admin: ${message}\n`);
    if (error instanceof UsageError) io.stderr(`\n${USAGE}\n`);
    printResult({ error: message });
    return exitCodeOf(error);
  } finally {
    await database?.close();
  }
}
