import type { ValidateFunction } from 'ajv';
import type { components } from '../../generated/openapi.ts';
import type { Context as OperationContext, OpenAPIBackend } from 'openapi-backend';
import type { WebhookEventCompatibility } from '../config.ts';
import { createAjv } from './ajv.ts';
import type { KoaContext } from './context.ts';

/** What the contract does not know about a stored event (`StoredEvent.unrecognized`). */
export type Unrecognized = components['schemas']['Unrecognized'];

type Schema = Record<string, unknown>;

/** The longest kind the event log can hold (`conversation_events.kind` is `varchar(64)`). */
const MAX_KIND_LENGTH = 64;
/** A marker names at most this many unknown properties, each path cut to `MAX_PATH_LENGTH` characters. */
const MAX_UNKNOWN_PROPERTIES = 100;
const MAX_PATH_LENGTH = 1000;

/**
 * An event of a kind the spec does not know still needs what storing it takes: an object with a
 * storable `kind`, and an `id` that is a valid event id when it has one (the idempotency key).
 */
function envelopeSchema(eventId: Schema): Schema {
  return {
    type: 'object',
    required: ['kind'],
    properties: {
      kind: { type: 'string', minLength: 1, maxLength: MAX_KIND_LENGTH, pattern: eventId.pattern },
      id: eventId,
    },
  };
}

/** A deep copy of `schema` without `additionalProperties: false`; `oneOf` becomes `anyOf`, as relaxing may let two branches match. */
function relaxed(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(relaxed);
  if (!schema || typeof schema !== 'object') return schema;
  const copy: Schema = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === 'additionalProperties' && value === false) continue;
    copy[key === 'oneOf' ? 'anyOf' : key] = relaxed(value);
  }
  return copy;
}

/** `$.a.b[0]['c d']`: a JSONPath naming a member of an event. */
function memberPath(parent: string, key: string | number): string {
  if (typeof key === 'number') return `${parent}[${key}]`;
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? `${parent}.${key}` : `${parent}[${JSON.stringify(key)}]`;
}

/**
 * The `accept-unknown` policy (`WEBHOOK_EVENT_COMPATIBILITY`), consulted only for a webhook batch
 * that failed validation: accepted batches never come here. Each event of the batch is examined
 * again: a kind the spec does not know is unrecognized as a whole; a known kind is checked against
 * its schema without `additionalProperties: false`, so that properties the spec does not know are
 * told apart from the rules that still hold (a missing field, a wrong type: the batch stays a 422).
 */
export class EventCompatibility {
  private readonly ajv = createAjv({ useDefaults: true });
  /** Validators of whether data fits a schema once relaxed, for choosing a union's branch: no defaults written. */
  private readonly probe = createAjv();
  private readonly relaxedByKind = new Map<string, ValidateFunction>();
  private readonly probes = new WeakMap<object, ValidateFunction>();
  private readonly kindSchemas: Map<string, Schema>;
  private readonly envelope: ValidateFunction;

  /** `schemas`: the spec's component schemas, dereferenced (openapi-backend's `definition`). */
  constructor(schemas: Record<string, unknown>) {
    const event = schemas.Event as { oneOf: Schema[] };
    this.kindSchemas = new Map(event.oneOf.map((schema) => [(schema.properties as { kind: { const: string } }).kind.const, schema]));
    this.envelope = this.probe.compile(envelopeSchema(schemas.EventId as Schema));
  }

  /**
   * For a batch that failed validation only inside its events: one entry per event, `null` for an
   * event the contract knows, when every failure is an unknown kind or unknown properties; undefined
   * when any event breaks another rule (the batch's 422 stands). Fills in the defaults of known kinds
   * as accepted batches get them.
   */
  examine(events: unknown[]): (Unrecognized | null)[] | undefined {
    const verdicts: (Unrecognized | null)[] = [];
    for (const event of events) {
      const verdict = this.examineEvent(event);
      if (verdict === undefined) return undefined;
      verdicts.push(verdict);
    }
    return verdicts;
  }

  private examineEvent(event: unknown): Unrecognized | null | undefined {
    if (!this.envelope(event)) return undefined;
    const schema = this.kindSchemas.get((event as { kind: string }).kind);
    if (!schema) return { kind: true, properties: [] };
    if (!this.relaxedValidator(schema)(event)) return undefined;
    const properties: string[] = [];
    this.collectUnknown(schema, event, '$', properties);
    if (properties.length === 0) return null;
    return { kind: false, properties: properties.slice(0, MAX_UNKNOWN_PROPERTIES).map((path) => (path.length > MAX_PATH_LENGTH ? `${path.slice(0, MAX_PATH_LENGTH)}…` : path)) };
  }

  private relaxedValidator(schema: Schema): ValidateFunction {
    const kind = (schema.properties as { kind: { const: string } }).kind.const;
    let validate = this.relaxedByKind.get(kind);
    if (!validate) this.relaxedByKind.set(kind, (validate = this.ajv.compile(relaxed(schema) as Schema)));
    return validate;
  }

  private fits(schema: Schema, data: unknown): boolean {
    let validate = this.probes.get(schema);
    if (!validate) this.probes.set(schema, (validate = this.probe.compile(relaxed(schema) as Schema)));
    return validate(data);
  }

  /** Walks `data` beside `schema`, adding the path of each member that a closed object does not list. */
  private collectUnknown(schema: Schema, data: unknown, path: string, found: string[]): void {
    for (const part of (schema.allOf as Schema[] | undefined) ?? []) this.collectUnknown(part, data, path, found);
    const branches = (schema.anyOf ?? schema.oneOf) as Schema[] | undefined;
    const branch = branches?.find((candidate) => this.fits(candidate, data));
    if (branch) this.collectUnknown(branch, data, path, found);
    if (Array.isArray(data)) {
      const items = schema.items as Schema | undefined;
      if (items && typeof items === 'object') data.forEach((item, i) => this.collectUnknown(items, item, memberPath(path, i), found));
      return;
    }
    if (!data || typeof data !== 'object') return;
    const properties = (schema.properties ?? {}) as Record<string, Schema>;
    const additional = schema.additionalProperties;
    for (const [key, value] of Object.entries(data)) {
      const member = memberPath(path, key);
      if (Object.hasOwn(properties, key)) this.collectUnknown(properties[key]!, value, member, found);
      else if (additional === false) found.push(member);
      else if (additional && typeof additional === 'object') this.collectUnknown(additional as Schema, value, member, found);
    }
  }
}

/** An error of the request's validation that lies inside one event of the body. */
const INSIDE_AN_EVENT = /^\/requestBody\/\d+(\/|$)/;

/**
 * Per event of a webhook batch that failed validation with `errors`, what the contract does not know
 * of it, when that is all that failed; undefined when something else failed or nothing is unknown.
 */
export function unrecognizedEventsOf(
  compatibility: EventCompatibility,
  body: unknown,
  errors: readonly { instancePath: string }[],
): (Unrecognized | null)[] | undefined {
  if (!Array.isArray(body) || !errors.every((error) => INSIDE_AN_EVENT.test(error.instancePath))) return undefined;
  const verdicts = compatibility.examine(body);
  // Nothing unknown found: whatever failed is not for this policy to excuse.
  return verdicts?.some((verdict) => verdict !== null) ? verdicts : undefined;
}

/**
 * The validation-failure hook of `accept-unknown`: true when `c` is a webhook batch that
 * `unrecognizedEventsOf` admits; the verdicts are then left in `ctx.state.unrecognizedEvents` for the
 * handler to store with the events.
 */
export function admitsUnrecognizedEvents(compatibility: EventCompatibility, c: OperationContext, ctx: KoaContext): boolean {
  if (c.operation.operationId !== 'ingestEvents') return false;
  const verdicts = unrecognizedEventsOf(compatibility, c.request.requestBody, c.validation.errors ?? []);
  if (!verdicts) return false;
  ctx.state.unrecognizedEvents = verdicts;
  return true;
}

/** The checker of the `accept-unknown` policy over the contract's schemas; none under `strict`. */
export function eventCompatibilityFor(api: OpenAPIBackend, policy: WebhookEventCompatibility): EventCompatibility | undefined {
  return policy === 'accept-unknown' ? new EventCompatibility(api.definition.components!.schemas as Record<string, unknown>) : undefined;
}
