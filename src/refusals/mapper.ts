import type { components } from '../../generated/openapi.ts';

export type RefusedDeliveryView = components['schemas']['RefusedDelivery'];
export type DeliveryRefusalsView = components['schemas']['DeliveryRefusals'];

/** A `refused_deliveries` row as `REFUSED_DELIVERY_COLUMNS` reads it (without the body), with its `resolved_at`. */
export interface RefusedDeliveryRow {
  id: string;
  owner_id: string;
  sender_id: string | null;
  conversation_id: string;
  status: number;
  reason: string;
  detail: string;
  body_bytes: string | null;
  event_count: number | null;
  attempts: number;
  first_seen_at: Date | string;
  last_seen_at: Date | string;
  replayed_at: Date | string | null;
  resolved_at: Date | string | null;
}

/** ISO 8601 of a timestamp column, whichever way the driver gives it. */
export const iso = (value: Date | string): string => new Date(value).toISOString();

/** Every column but the body (which only a replay reads). */
export const REFUSED_DELIVERY_COLUMNS = `id, owner_id, sender_id, conversation_id, status, reason, detail, body_bytes, event_count, attempts,
  first_seen_at, last_seen_at, replayed_at`;

export function toRefusedDeliveryView(row: RefusedDeliveryRow): RefusedDeliveryView {
  return {
    id: Number(row.id),
    // Refused before organizations: the owner was the user who sent it.
    user_id: row.sender_id ?? row.owner_id,
    org_id: row.owner_id,
    conversation_id: row.conversation_id,
    status: row.status as RefusedDeliveryView['status'],
    reason: row.reason,
    detail: row.detail,
    event_count: row.event_count,
    body_bytes: row.body_bytes === null ? null : Number(row.body_bytes),
    attempts: row.attempts,
    first_seen_at: iso(row.first_seen_at),
    last_seen_at: iso(row.last_seen_at),
    replayed_at: row.replayed_at === null ? null : iso(row.replayed_at),
    resolved_at: row.resolved_at === null ? null : iso(row.resolved_at),
  };
}
