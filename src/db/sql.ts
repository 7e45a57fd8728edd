import type { EntityManager, Knex } from '@mikro-orm/postgresql';

/** What a statement runs on: an EntityManager (its transaction inside `transactional`, else the pool) or a knex transaction. */
export type SqlRunner = EntityManager | Knex.Transaction;

interface DriverResult {
  rows: unknown[];
  rowCount: number | null;
}

/**
 * The one way our raw SQL runs: a parameterized statement (`$1`, `$2`, …) straight through the driver
 * (arrays go as PostgreSQL arrays; planned with its values unless `name` prepares it once per connection).
 */
async function query(on: SqlRunner, text: string, values: readonly unknown[], name?: string): Promise<DriverResult> {
  const client = 'getConnection' in on ? (on.getTransactionContext<Knex.Transaction>() ?? on.getConnection().getKnex()).client : on.client;
  const connection = await client.acquireConnection();
  try {
    return await connection.query(name ? { name, text, values } : { text, values });
  } finally {
    client.releaseConnection(connection);
  }
}

/** The statement's rows, in an array of the caller's own (why: docs/performance.md, "Young-generation collections"). */
export async function sqlRows<T>(on: SqlRunner, text: string, values: readonly unknown[] = [], name?: string): Promise<T[]> {
  const result = await query(on, text, values, name);
  const rows = result.rows.slice() as T[];
  result.rows.length = 0;
  return rows;
}

/** Runs a statement for its effect; returns how many rows it touched. */
export async function sqlRun(on: SqlRunner, text: string, values: readonly unknown[] = []): Promise<number> {
  return (await query(on, text, values)).rowCount ?? 0;
}

/**
 * For the rest of the transaction `trx`, rows are reached by index: for statements that look rows up by key
 * in batches (`unnest` of keys joined to a table). On a table grown fast and not analysed yet the planner
 * guesses hundreds of rows per key and scans it whole per statement instead (docs/performance.md).
 */
export async function keyLookupsOnly(trx: Knex.Transaction): Promise<void> {
  await query(trx, "select set_config('enable_seqscan', 'off', true)", []);
}
