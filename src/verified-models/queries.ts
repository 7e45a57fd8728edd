import type { EntityManager } from '@mikro-orm/postgresql';
import { sqlRows } from '../db/sql.ts';

/** Verified models' raw SQL (the list and creation go through the `VerifiedModel` entity). */

/** Deletes a model (`em` in a transaction) and returns what it named, or undefined when there was none. */
export async function deleteModel(em: EntityManager, id: number): Promise<{ provider: string; model_name: string } | undefined> {
  const [deleted] = await sqlRows<{ provider: string; model_name: string }>(em, 'delete from verified_models where id = $1 returning provider, model_name', [id]);
  return deleted;
}
