import type { EntityManager } from '@mikro-orm/postgresql';

/**
 * One parameterized statement (`$1`, `$2`, …) on a connection of MikroORM's pool, straight through
 * the driver: arrays go as PostgreSQL arrays (knex would spread them into lists), and the statement
 * is planned with its values (unnamed), which the skewed search filters need. A `name` prepares it
 * once per connection instead, for a statement repeated many times with one good plan.
 */
export async function sqlRows<T>(em: EntityManager, text: string, values: unknown[], name?: string): Promise<T[]> {
  const client = em.getConnection().getKnex().client;
  const connection = await client.acquireConnection();
  try {
    const result = await connection.query(name ? { name, text, values } : { text, values });
    return result.rows as T[];
  } finally {
    client.releaseConnection(connection);
  }
}
