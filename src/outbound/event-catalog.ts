import type { WebhookEventType } from './mapper.ts';

/** Messages about the endpoints themselves: sent only to the owner's other endpoints that list them in `event_types`. */
export const OPERATIONAL_TYPES: ReadonlySet<string> = new Set(['endpoint.disabled', 'endpoint.recovered', 'message.attempt.exhausted', 'message.attempt.failing']);

export interface EventTypeInfo {
  type: WebhookEventType;
  description: string;
  operational: boolean;
  schema: Record<string, unknown>;
  example: Record<string, unknown>;
}

interface SpecDocument {
  components?: { schemas?: Record<string, Record<string, unknown>> };
}

const catalogs = new WeakMap<object, EventTypeInfo[]>();

/**
 * Every `WebhookEventType` with its body's JSON Schema and example: the contract's component marked
 * `x-webhook-event-type`, its OpenAPI-only keys (`x-…`, `example`) left out. Built once per document;
 * a type without its component is a contract error, thrown at the first call.
 */
export function webhookEventCatalog(document: object): EventTypeInfo[] {
  let catalog = catalogs.get(document);
  if (catalog) return catalog;
  const schemas = (document as SpecDocument).components?.schemas ?? {};
  const payloads = new Map(Object.values(schemas).filter((s) => typeof s['x-webhook-event-type'] === 'string').map((s) => [s['x-webhook-event-type'] as string, s]));
  catalog = ((schemas.WebhookEventType?.enum ?? []) as WebhookEventType[]).map((type) => {
    const payload = payloads.get(type);
    if (!payload) throw new Error(`spec: no component with x-webhook-event-type ${type}`);
    return {
      type,
      description: String(payload.description ?? '').trim(),
      operational: OPERATIONAL_TYPES.has(type),
      schema: { $schema: 'https://json-schema.org/draft/2020-12/schema', ...(plainSchema(payload) as Record<string, unknown>) },
      example: payload.example as Record<string, unknown>,
    };
  });
  catalogs.set(document, catalog);
  return catalog;
}

/** A copy of `value` without the keys that only OpenAPI reads. */
function plainSchema(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(plainSchema);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value as Record<string, unknown>)
      .filter(([key]) => !key.startsWith('x-') && key !== 'example')
      .map(([key, item]) => [key, plainSchema(item)]),
  );
}
