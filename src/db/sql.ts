import type { EntityManager } from '@mikro-orm/postgresql';
import type pg from 'pg';

/** Runs `use` on a driver connection of MikroORM's pool, released afterwards whatever happens. */
export async function withDriverConnection<T>(em: EntityManager, use: (connection: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = em.getConnection().getKnex().client;
  const connection = (await client.acquireConnection()) as pg.PoolClient;
  try {
    return await use(connection);
  } finally {
    await client.releaseConnection(connection);
  }
}

/**
 * One parameterized statement (`$1`, `$2`, …) on a connection of MikroORM's pool, straight through
 * the driver: arrays go as PostgreSQL arrays (knex would spread them into lists), and the statement
 * is planned with its values (unnamed), which the skewed search filters need. A `name` prepares it
 * once per connection instead, for a statement repeated many times with one good plan.
 */
export function sqlRows<T>(em: EntityManager, text: string, values: unknown[], name?: string): Promise<T[]> {
  return withDriverConnection(em, async (connection) => {
    const result = await connection.query(name ? { name, text, values } : { text, values });
    return result.rows as T[];
  });
}
