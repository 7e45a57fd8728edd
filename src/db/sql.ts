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
    // The driver's result stays reachable from the old generation until its next collection (after a
    // young collection every query's result was still alive, after a full one none): rows left in it
    // survived each young collection, which then copied every page read since the last one. The
    // caller gets an array of its own, and the rows die young (docs/performance.md, "Young-generation collections").
    const rows = result.rows.slice() as T[];
    result.rows.length = 0;
    return rows;
  } finally {
    client.releaseConnection(connection);
  }
}
