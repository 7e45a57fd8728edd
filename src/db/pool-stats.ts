import type { MikroORM } from '@mikro-orm/postgresql';

/** What the metrics read of a connection pool (tarn's, under MikroORM's knex). */
export interface PoolStats {
  numUsed(): number;
  numFree(): number;
  numPendingAcquires(): number;
  numPendingCreates(): number;
}

/** The ORM's connection pool as it is now; undefined before knex has made it. */
export function poolStatsOf(orm: MikroORM): PoolStats | undefined {
  // knex keeps tarn's pool on its client; neither MikroORM nor knex has a public accessor for it.
  return orm.em.getConnection().getKnex().client.pool as PoolStats | undefined;
}
