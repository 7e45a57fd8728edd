/**
 * UUIDs as pydantic accepts them: dashed, or 32 hex digits without dashes (the OpenHands
 * agent-server addresses conversations by `uuid.hex`).
 */
export const UUID_PATTERN = /^(?:[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12})$/i;

/** The dashed form only: what `format: uuid` means in the spec. */
export const DASHED_UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Canonical (lower-case, dashed) form of a UUID matching `UUID_PATTERN`. */
export function canonicalUuid(value: string): string {
  const hex = value.replace(/-/g, '').toLowerCase();
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
