import type { components } from '../../generated/openapi.ts';
import type { RecoverTaskRow } from './queries.ts';

export type WebhookEndpointView = components['schemas']['WebhookEndpoint'];
export type WebhookEndpointWithSecret = components['schemas']['WebhookEndpointWithSecret'];
export type WebhookMessageView = components['schemas']['WebhookMessage'];
export type WebhookAttemptView = components['schemas']['WebhookAttempt'];
export type WebhookEventType = components['schemas']['WebhookEventType'];
export type WebhookEndpointStatsView = components['schemas']['WebhookEndpointStats'];
export type WebhookRecoverTaskView = components['schemas']['WebhookRecoverTask'];
export type WebhookMessageRetryTaskView = components['schemas']['WebhookMessageRetryTask'];

/** A `webhook_endpoints` row as the driver returns it. */
export interface EndpointRow {
  id: string;
  owner_id: string;
  url: string;
  description: string;
  event_types: WebhookEventType[] | null;
  conversation_id: string | null;
  conversation_ids: string[] | null;
  /** `key:value` tags a conversation must carry, as the object `conversations.tags` must contain. */
  tags: Record<string, string> | null;
  /** Messages a second at most; null: no limit. */
  rate_limit: number | null;
  /** Custom headers, encrypted (endpoint-headers.ts); null when none. */
  headers: string | null;
  disabled: boolean;
  disabled_reason: string | null;
  secret: string;
  previous_secret: string | null;
  previous_secret_until: Date | null;
  failing_since: Date | null;
  created_at: Date;
  updated_at: Date;
}

/**
 * One message at one endpoint: a `webhook_deliveries` row joined with its `webhook_messages` row
 * (see `DELIVERY_SELECT` in queries.ts), as the driver returns it.
 */
export interface MessageRow {
  id: string;
  endpoint_id: string;
  type: WebhookEventType;
  data: Record<string, unknown>;
  state: 'pending' | 'succeeded' | 'failed';
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  next_attempt_at: Date | null;
  created_at: Date;
}

export interface AttemptRow {
  attempt: number;
  started_at: Date;
  duration_ms: number;
  status_code: number | null;
  error: string | null;
  response_excerpt: string | null;
}

const iso = (value: Date | string): string => new Date(value).toISOString();

/** The endpoint as its owner sees it; `headers` from `headersView` (sensitive values never shown). */
export function toEndpointView(row: EndpointRow, headers: { headers: Record<string, string>; sensitive_headers: string[] }): WebhookEndpointView {
  return {
    id: row.id,
    url: row.url,
    description: row.description,
    event_types: row.event_types,
    conversation_id: row.conversation_id,
    conversation_ids: row.conversation_ids,
    tags: row.tags === null ? null : Object.entries(row.tags).map(([key, value]) => `${key}:${value}`).sort(),
    rate_limit: row.rate_limit,
    ...headers,
    disabled: row.disabled,
    disabled_reason: row.disabled_reason,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

export function toMessageView(row: MessageRow): WebhookMessageView {
  return {
    id: row.id,
    type: row.type,
    state: row.state,
    attempts: row.attempts,
    last_status_code: row.last_status_code,
    last_error: row.last_error,
    next_attempt_at: row.next_attempt_at ? iso(row.next_attempt_at) : null,
    created_at: iso(row.created_at),
  };
}

export function toAttemptView(row: AttemptRow): WebhookAttemptView {
  return {
    attempt: row.attempt,
    started_at: iso(row.started_at),
    duration_ms: row.duration_ms,
    status_code: row.status_code,
    error: row.error,
    response_excerpt: row.response_excerpt,
  };
}

export function toRecoverTaskView(row: RecoverTaskRow): WebhookRecoverTaskView {
  return {
    id: row.id,
    endpoint_id: row.endpoint_id,
    since: iso(row.since),
    until: iso(row.until),
    state: row.state,
    total: row.total,
    sent: row.sent,
    succeeded: row.succeeded,
    last_error: row.last_error,
    created_at: iso(row.created_at),
    finished_at: row.finished_at ? iso(row.finished_at) : null,
  };
}

/** A bulk retry task with the filter it applies (its defaults filled in). */
export function toRetryTaskView(row: RecoverTaskRow): WebhookMessageRetryTaskView {
  const { since, until, ...progress } = toRecoverTaskView(row);
  return {
    ...progress,
    filter: { status: row.status, event_type: row.event_type as WebhookEventType | null, conversation_id: row.conversation_id, since, until },
  };
}
