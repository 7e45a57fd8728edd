import path from 'node:path';
import { DEFAULT_EMBEDDED_PG_PORT, type Config } from './config.ts';
import { PACKAGE_ROOT } from './package-root.ts';

/** The address a person can open: a wildcard listen address is reached through localhost. */
export function listeningUrl(host: string, port: number): string {
  const reachable = host === '0.0.0.0' || host === '::' ? 'localhost' : host.includes(':') ? `[${host}]` : host;
  return `http://${reachable}:${port}`;
}

/** A shell word: as is when safe, else single-quoted. */
function shellWord(value: string): string {
  return /^[\w@%+=:,./-]+$/.test(value) ? value : `'${value.replaceAll("'", `'\\''`)}'`;
}

/**
 * The command that creates the first super admin on this server's database, ready to paste in the
 * checkout: the admin CLI finds the same embedded database only if it is given the same `DATA_DIR`
 * and `EMBEDDED_PG_PORT`, so those that differ from the defaults are part of the command. A
 * `DATABASE_URL` is not repeated (it holds a password): the CLI must run with the same one.
 */
export function firstSuperAdminCommand(config: Pick<Config, 'database'>): string {
  const command = 'npm run admin -- create-user --email admin@example.com --super-admin';
  const database = config.database;
  if (database.kind === 'url') return command;
  const prefix: string[] = [];
  if (database.dataDir !== path.join(PACKAGE_ROOT, '.data')) prefix.push(`DATA_DIR=${shellWord(database.dataDir)}`);
  if (database.port !== DEFAULT_EMBEDDED_PG_PORT) prefix.push(`EMBEDDED_PG_PORT=${database.port}`);
  return [...prefix, command].join(' ');
}
