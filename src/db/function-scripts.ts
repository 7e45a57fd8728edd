import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Knex } from '@mikro-orm/postgresql';
import { PACKAGE_ROOT } from '../package-root.ts';
import { sqlRows, sqlRun } from './sql.ts';

/** Where the current body of every stored function and trigger lives, one file each (read from the package root, as the spec is). */
export const FUNCTION_SCRIPTS_DIR = path.join(PACKAGE_ROOT, 'src', 'db', 'functions');

/** The table recording which version of each script the database holds (Flyway's repeatable migrations). */
export const FUNCTION_SCRIPTS_TABLE = 'function_scripts';

export interface FunctionScript {
  /** The file's name without `.sql`: the function it defines. */
  readonly name: string;
  readonly sql: string;
  readonly checksum: string;
}

/** Every script of `FUNCTION_SCRIPTS_DIR`, in name order. */
export function functionScripts(): FunctionScript[] {
  return fs
    .readdirSync(FUNCTION_SCRIPTS_DIR)
    .filter((file) => file.endsWith('.sql'))
    .sort()
    .map((file) => {
      const sql = fs.readFileSync(path.join(FUNCTION_SCRIPTS_DIR, file), 'utf8');
      return { name: file.slice(0, -'.sql'.length), sql, checksum: createHash('sha256').update(sql).digest('hex') };
    });
}

/**
 * Runs (`create or replace`) each script whose checksum differs from the recorded one, or every script
 * when `all` (a migration ran: it may have dropped what a script made). The caller holds the migration lock.
 */
export async function applyFunctionScripts(trx: Knex.Transaction, all: boolean): Promise<string[]> {
  await sqlRun(
    trx,
    `create table if not exists ${FUNCTION_SCRIPTS_TABLE} (
       name text primary key, checksum text not null, applied_at timestamptz not null default now())`,
  );
  const rows = await sqlRows<{ name: string; checksum: string }>(trx, `select name, checksum from ${FUNCTION_SCRIPTS_TABLE}`);
  const recorded = new Map(rows.map((row) => [row.name, row.checksum]));
  const applied: string[] = [];
  for (const script of functionScripts()) {
    if (!all && recorded.get(script.name) === script.checksum) continue;
    await sqlRun(trx, script.sql);
    await sqlRun(
      trx,
      `insert into ${FUNCTION_SCRIPTS_TABLE} (name, checksum) values ($1, $2)
       on conflict (name) do update set checksum = excluded.checksum, applied_at = now()`,
      [script.name, script.checksum],
    );
    applied.push(script.name);
  }
  return applied;
}
