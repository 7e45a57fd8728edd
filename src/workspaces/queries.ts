import type { EntityManager } from '@mikro-orm/postgresql';
import { sqlRows, sqlRun } from '../db/sql.ts';

/** Workspaces' raw SQL (workspaces and links are entities): deliveries, key ids, resealing. */

/** Every key id the stored workspace secrets were encrypted with. */
export async function secretKeyIds(em: EntityManager): Promise<string[]> {
  const rows = await sqlRows<{ key_id: string }>(
    em,
    `select distinct split_part(webhook_secret_ciphertext, ':', 2) as key_id from workspaces
     union select distinct split_part(svc_acc_api_key_ciphertext, ':', 2) from workspaces`,
  );
  return rows.map((row) => row.key_id);
}

/** Stores a tracker delivery (its body's text into a `json` column: as sent) once per delivery id; false for a duplicate. */
export async function insertTrackerDelivery(em: EntityManager, workspaceId: number, deliveryId: string, payload: string): Promise<boolean> {
  const inserted = await sqlRun(
    em,
    `insert into tracker_deliveries (workspace_id, delivery_id, payload) values ($1, $2, $3::json)
     on conflict (workspace_id, delivery_id) do nothing`,
    [workspaceId, deliveryId, payload],
  );
  return inserted > 0;
}

/** Every workspace's ciphertexts, locked (`em` in a transaction). */
export function lockedWorkspaceSecrets(em: EntityManager): Promise<{ id: number; webhook_secret_ciphertext: string; svc_acc_api_key_ciphertext: string }[]> {
  return sqlRows(em, 'select id, webhook_secret_ciphertext, svc_acc_api_key_ciphertext from workspaces order by id for update');
}

export async function updateWorkspaceSecrets(em: EntityManager, id: number, webhookSecret: string, apiKey: string): Promise<void> {
  await sqlRun(em, 'update workspaces set webhook_secret_ciphertext = $1, svc_acc_api_key_ciphertext = $2 where id = $3', [webhookSecret, apiKey, id]);
}
