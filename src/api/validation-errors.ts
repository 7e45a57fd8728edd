import type { ErrorObject, ValidateFunction } from 'ajv';
import type { OpenAPIBackend } from 'openapi-backend';
import { SECRET_FIELDS } from '../logger.ts';
import { holdsSecret } from '../secret-keys.ts';
import { createAjv } from './ajv.ts';
import type { components } from '../../generated/openapi.ts';

export type ValidationError = components['schemas']['ValidationError'];
type Loc = ValidationError['loc'];

/** Thrown for any request that fails validation; rendered as a 422 `HTTPValidationError`. */
export class RequestValidationError extends Error {
  override name = 'RequestValidationError';
  readonly detail: ValidationError[];
  constructor(detail: ValidationError[]) {
    super(`${detail.length} validation error(s)`);
    this.detail = detail.map((error) => ('input' in error ? { ...error, input: boundedInput(error.input) } : error));
  }
}

/** The most of one input a 422 echoes (docs/contract.md, "Validation errors"). */
export const MAX_ECHOED_INPUT_BYTES = 1024;

const echoSizes = new WeakMap<object, number>();
const lenient = new TextDecoder('utf-8');

/**
 * `input` as a 422 may echo it: a string past `MAX_ECHOED_INPUT_BYTES` (UTF-8) is cut there and
 * marked `…[truncated: N bytes]`; an object or array whose JSON is longer becomes `{type, bytes}`.
 */
export function boundedInput(input: unknown): unknown {
  if (typeof input === 'string') {
    const bytes = Buffer.byteLength(input);
    if (bytes <= MAX_ECHOED_INPUT_BYTES) return input;
    const head = lenient.decode(Buffer.from(input.slice(0, MAX_ECHOED_INPUT_BYTES)).subarray(0, MAX_ECHOED_INPUT_BYTES)).replace(/\uFFFD$/, '');
    return `${head}…[truncated: ${bytes} bytes]`;
  }
  if (input === null || typeof input !== 'object') return input;
  // One size per object, however many problems echo it (a `missing` field echoes its whole event).
  let bytes = echoSizes.get(input);
  if (bytes === undefined) {
    bytes = Buffer.byteLength(JSON.stringify(input) ?? '');
    echoSizes.set(input, bytes);
  }
  return bytes <= MAX_ECHOED_INPUT_BYTES ? input : { type: Array.isArray(input) ? 'array' : 'object', bytes };
}

/** Where each request part lives in the object openapi-backend validates, and its FastAPI name. */
const LOCATION_NAMES: Record<string, string> = {
  requestBody: 'body',
  path: 'path',
  query: 'query',
  header: 'header',
  cookie: 'cookie',
};

/** Properties whose values are secrets and must not be echoed back in `input`. */
const SECRET_PROPERTIES: ReadonlySet<string> = new Set(SECRET_FIELDS);

function decodePointer(pointer: string): string[] {
  if (pointer === '') return [];
  return pointer
    .slice(1)
    .split('/')
    .map((segment) => segment.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** Turns an ajv instance path into a FastAPI `loc`, with array indices as integers. */
function locate(root: unknown, instancePath: string): { loc: Loc; value: unknown } {
  const [location, ...segments] = decodePointer(instancePath);
  const loc: Loc = [];
  let value: unknown = root;
  if (location !== undefined) {
    loc.push(LOCATION_NAMES[location] ?? location);
    value = (root as Record<string, unknown>)?.[location];
  }
  for (const segment of segments) {
    // A repeatable query parameter given once is validated as an array of that one string.
    if (typeof value === 'string' && segment === '0') {
      loc.push(0);
      continue;
    }
    if (Array.isArray(value)) {
      const index = Number(segment);
      loc.push(index);
      value = value[index];
    } else {
      loc.push(segment);
      value = (value as Record<string, unknown> | undefined)?.[segment];
    }
  }
  return { loc, value };
}

/** A secret field of the contract, or any key that looks like it holds a secret (`src/secret-keys.ts`). */
export function isSecretProperty(key: string, value: unknown): boolean {
  return SECRET_PROPERTIES.has(key) || holdsSecret(key, value);
}

/** `value` with every secret replaced by `[redacted]`, at any depth; the same value when it holds none. */
function redactSecrets(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  let changed = false;
  if (Array.isArray(value)) {
    const items = value.map((item) => {
      const redacted = redactSecrets(item);
      if (redacted !== item) changed = true;
      return redacted;
    });
    return changed ? items : value;
  }
  const entries = Object.entries(value).map(([key, item]) => {
    const redacted = isSecretProperty(key, item) ? '[redacted]' : redactSecrets(item);
    if (redacted !== item) changed = true;
    return [key, redacted];
  });
  return changed ? Object.fromEntries(entries) : value;
}

function quoteAll(values: unknown[]): string {
  const quoted = values.map((v) => (typeof v === 'string' ? `'${v}'` : JSON.stringify(v)));
  if (quoted.length <= 1) return quoted.join('');
  return `${quoted.slice(0, -1).join(', ')} or ${quoted[quoted.length - 1]}`;
}

const TYPE_ERRORS: Record<string, { type: string; msg: string }> = {
  string: { type: 'string_type', msg: 'Input should be a valid string' },
  integer: { type: 'int_type', msg: 'Input should be a valid integer' },
  number: { type: 'float_type', msg: 'Input should be a valid number' },
  boolean: { type: 'bool_type', msg: 'Input should be a valid boolean' },
  array: { type: 'list_type', msg: 'Input should be a valid list' },
  object: { type: 'model_attributes_type', msg: 'Input should be a valid dictionary or object to extract fields from' },
  null: { type: 'none_required', msg: 'Input should be None' },
};

const FORMAT_ERRORS: Record<string, { type: string; msg: string }> = {
  uuid: { type: 'uuid_parsing', msg: 'Input should be a valid UUID' },
  email: { type: 'value_error', msg: 'value is not a valid email address' },
  'date-time': { type: 'datetime_parsing', msg: 'Input should be a valid datetime' },
  uri: { type: 'url_parsing', msg: 'Input should be a valid URL' },
};

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** Maps one (leaf) ajv error to the FastAPI/pydantic error of the same meaning. */
function toValidationError(error: ErrorObject, root: unknown): ValidationError {
  const { loc, value } = locate(root, error.instancePath);
  const p = error.params as Record<string, unknown>;
  const make = (type: string, msg: string, input: unknown, ctx?: Record<string, unknown>): ValidationError => {
    const result: ValidationError = { loc, msg, type };
    // A secret field's own value (`webhook_secret: "has a space"`) is redacted as well as objects holding one.
    const last = loc[loc.length - 1];
    if (input !== undefined) result.input = typeof last === 'string' && SECRET_PROPERTIES.has(last) ? '[redacted]' : redactSecrets(input);
    if (ctx) result.ctx = ctx;
    return result;
  };

  switch (error.keyword) {
    case 'required': {
      const missing = String(p.missingProperty);
      // openapi-backend wraps the body as `requestBody`: a missing body is the body itself missing.
      if (loc.length === 0 && missing === 'requestBody') return { loc: ['body'], msg: 'Field required', type: 'missing' };
      loc.push(missing);
      // `input` is the object the field is missing from, not the (absent) field itself.
      return { loc, msg: 'Field required', type: 'missing', ...(value !== undefined ? { input: redactSecrets(value) } : {}) };
    }
    case 'additionalProperties': {
      const extra = String(p.additionalProperty);
      loc.push(extra);
      const input = (value as Record<string, unknown> | undefined)?.[extra];
      return make('extra_forbidden', 'Extra inputs are not permitted', isSecretProperty(extra, input) ? '[redacted]' : input);
    }
    case 'const':
      return make('literal_error', `Input should be ${quoteAll([p.allowedValue])}`, value, {
        expected: quoteAll([p.allowedValue]),
      });
    case 'enum': {
      const allowed = p.allowedValues as unknown[];
      const expected = quoteAll(allowed);
      return make(allowed.length === 1 ? 'literal_error' : 'enum', `Input should be ${expected}`, value, { expected });
    }
    case 'type': {
      const types = String(p.type).split(',');
      const primary = types.find((t) => t !== 'null') ?? 'null';
      const known = TYPE_ERRORS[primary] ?? { type: `${primary}_type`, msg: `Input should be a valid ${primary}` };
      return make(known.type, known.msg, value);
    }
    case 'format': {
      const known = FORMAT_ERRORS[String(p.format)] ?? {
        type: 'value_error',
        msg: `Input should be a valid ${String(p.format)}`,
      };
      return make(known.type, known.msg, value);
    }
    case 'minimum':
      return make('greater_than_equal', `Input should be greater than or equal to ${p.limit}`, value, { ge: p.limit });
    case 'maximum':
      return make('less_than_equal', `Input should be less than or equal to ${p.limit}`, value, { le: p.limit });
    case 'exclusiveMinimum':
      return make('greater_than', `Input should be greater than ${p.limit}`, value, { gt: p.limit });
    case 'exclusiveMaximum':
      return make('less_than', `Input should be less than ${p.limit}`, value, { lt: p.limit });
    case 'minLength':
      return make('string_too_short', `String should have at least ${plural(Number(p.limit), 'character')}`, value, {
        min_length: p.limit,
      });
    case 'maxLength':
      return make('string_too_long', `String should have at most ${plural(Number(p.limit), 'character')}`, value, {
        max_length: p.limit,
      });
    case 'pattern': {
      // A pattern that stands for a format (`x-format`, e.g. the conversation id) fails as that format would.
      const format = (error.parentSchema as { 'x-format'?: string } | undefined)?.['x-format'];
      const known = format ? FORMAT_ERRORS[format] : undefined;
      if (known) return make(known.type, known.msg, value);
      return make('string_pattern_mismatch', `String should match pattern '${p.pattern}'`, value, { pattern: p.pattern });
    }
    case 'minItems':
      return make('too_short', `List should have at least ${plural(Number(p.limit), 'item')}`, value, {
        min_length: p.limit,
      });
    case 'maxItems':
      return make('too_long', `List should have at most ${plural(Number(p.limit), 'item')}`, value, {
        max_length: p.limit,
      });
    case 'uniqueItems': {
      const [first, second] = [Number(p.i), Number(p.j)].sort((a, b) => a - b);
      return make('unique_items', `List should have unique items; items ${first} and ${second} are identical`, value, {
        first,
        second,
      });
    }
    case 'unionTag': {
      const expected = quoteAll(p.expected as unknown[]);
      return make(
        'union_tag_invalid',
        `Input tag '${String(value)}' found using '${String(p.tag)}' does not match any of the expected tags: ${expected}`,
        value,
        { discriminator: `'${String(p.tag)}'`, tag: String(value), expected_tags: expected },
      );
    }
    case 'discriminator': {
      const tag = String(p.tag);
      if (p.error === 'tag' && (value === null || typeof value !== 'object' || Array.isArray(value))) {
        return make('model_attributes_type', TYPE_ERRORS.object!.msg, value);
      }
      const tagValue = (value as Record<string, unknown>)[tag];
      if (tagValue === undefined) {
        return make('union_tag_not_found', `Unable to extract tag using discriminator '${tag}'`, value, {
          discriminator: `'${tag}'`,
        });
      }
      const expectedTags = quoteAll(discriminatorTags(error));
      return make(
        'union_tag_invalid',
        `Input tag '${String(tagValue)}' found using '${tag}' does not match any of the expected tags: ${expectedTags}`,
        value,
        { discriminator: `'${tag}'`, tag: String(tagValue), expected_tags: expectedTags },
      );
    }
    default:
      return make('value_error', error.message ?? 'Invalid value', value);
  }
}

function discriminatorTags(error: ErrorObject): unknown[] {
  const schema = error.parentSchema as { oneOf?: { properties?: Record<string, { const?: unknown; enum?: unknown[] }> }[] };
  const tag = String((error.params as Record<string, unknown>).tag);
  return (schema?.oneOf ?? []).map((branch) => branch.properties?.[tag]?.const ?? branch.properties?.[tag]?.enum?.[0]);
}

function isWithin(instancePath: string, ancestor: string): boolean {
  return instancePath === ancestor || instancePath.startsWith(`${ancestor}/`);
}

/**
 * Compiled union branches. openapi-backend replaces repeated subschemas by `$ref`s into the
 * operation's request schema, so a branch is compiled as a reference into that schema.
 */
const branchValidators = new Map<string, ValidateFunction>();
const registeredRoots = new WeakMap<object, string>();
let branchAjv: ReturnType<typeof createAjv> | undefined;
let rootCount = 0;

function branchErrors(root: object, pointer: string, data: unknown, instancePath: string): ErrorObject[] {
  branchAjv ??= createAjv();
  let rootId = registeredRoots.get(root);
  if (!rootId) {
    rootId = `request-${++rootCount}`;
    branchAjv.addSchema(root, rootId);
    registeredRoots.set(root, rootId);
  }
  const ref = `${rootId}#${pointer}`;
  let validate = branchValidators.get(ref);
  if (!validate) {
    validate = branchAjv.compile({ $ref: ref });
    branchValidators.set(ref, validate);
  }
  if (validate(data)) return [];
  return resolveUnions(validate.errors ?? [], root).map((e) => ({ ...e, instancePath: instancePath + e.instancePath }));
}

/** A branch error that says "the tag property has another value": this branch was not meant. */
function tagMismatch(errors: ErrorObject[], instancePath: string): ErrorObject | undefined {
  return errors.find(
    (e) => e.keyword === 'const' && e.instancePath.startsWith(`${instancePath}/`) && !e.instancePath.slice(instancePath.length + 1).includes('/'),
  );
}

/**
 * Ajv reports a failed `anyOf`/`oneOf` without a discriminator (such as "TextContent or
 * ImageContent", or "X or null") as the union's error plus the errors of every branch, with
 * schema paths that cannot tell the branches apart. Pydantic-style output names the problems of
 * the branch the input was meant for, so each union is validated again branch by branch, and the
 * branch that fits best replaces the union's errors: not a branch of another type, not one whose
 * tag (`type: const`) differs, then the fewest errors. When every branch's tag differs, the answer
 * is a single `union_tag_invalid`.
 */
function resolveUnions(errors: ErrorObject[], root: object): ErrorObject[] {
  const resolved: ErrorObject[] = [];
  for (const error of errors) {
    if (error.keyword !== 'anyOf' && error.keyword !== 'oneOf') {
      resolved.push(error);
      continue;
    }
    // The branch errors came just before the union's own error, all under its instance path.
    while (resolved.length && isWithin(resolved[resolved.length - 1]!.instancePath, error.instancePath)) resolved.pop();
    const unionPointer = error.schemaPath.slice(error.schemaPath.indexOf('#') + 1);
    let branches: ErrorObject[][];
    try {
      branches = (error.schema as object[]).map((_, i) =>
        branchErrors(root, `${unionPointer}/${i}`, error.data, error.instancePath),
      );
    } catch {
      // A union we cannot re-validate on its own still gets a precise location, if a vaguer message.
      resolved.push(error);
      continue;
    }
    if (branches.some((b) => b.length === 0)) {
      resolved.push(error); // oneOf matched more than one branch
      continue;
    }
    const tags = branches.map((b) => tagMismatch(b, error.instancePath));
    if (tags.every((t) => t && t.instancePath === tags[0]!.instancePath)) {
      resolved.push({
        ...tags[0]!,
        keyword: 'unionTag',
        params: { tag: tags[0]!.instancePath.split('/').pop(), expected: tags.map((t) => t!.params.allowedValue) },
      });
      continue;
    }
    const wrongType = (b: ErrorObject[]) => b.length === 1 && b[0]!.keyword === 'type' && b[0]!.instancePath === error.instancePath;
    const rank = (b: ErrorObject[], i: number) => [Number(wrongType(b)), Number(Boolean(tags[i])), b.length];
    let best = 0;
    for (let i = 1; i < branches.length; i++) {
      const [a, b] = [rank(branches[i]!, i), rank(branches[best]!, best)];
      const cmp = a[0]! - b[0]! || a[1]! - b[1]! || a[2]! - b[2]!;
      if (cmp < 0) best = i;
    }
    resolved.push(...branches[best]!);
  }
  return resolved;
}

/**
 * Converts ajv's errors for a validated request into FastAPI's `detail` list, at most `limit` long.
 * `request` is the validated value; `schema`, the request-body schema it was validated against.
 */
export function toValidationErrors(
  errors: ErrorObject[],
  request: unknown,
  schema: object,
  limit: number,
): ValidationError[] {
  const detail: ValidationError[] = [];
  const seen = new Set<string>();
  for (const error of resolveUnions(errors, schema)) {
    const converted = toValidationError(error, request);
    const key = `${JSON.stringify(converted.loc)}|${converted.type}`;
    if (seen.has(key)) continue;
    seen.add(key);
    detail.push(converted);
    if (detail.length >= limit) break;
  }
  return detail;
}

/** The 422 for a body that is not valid JSON, in the shape FastAPI gives it. */
export function jsonInvalid(message: string, position: number | undefined): ValidationError {
  return {
    loc: ['body', position ?? 0],
    msg: 'JSON decode error',
    type: 'json_invalid',
    input: {},
    ctx: { error: message },
  };
}

/** The 422 of an operation whose request failed validation; its body validator's schema resolves the `$ref`s in union errors. */
export function requestValidationError(
  api: OpenAPIBackend,
  operationId: string,
  errors: ErrorObject[],
  validated: { requestBody: unknown; path: unknown; query: unknown; header: unknown },
  limit: number,
): RequestValidationError {
  const [bodyValidator] = api.validator.getRequestValidatorsForOperation(operationId) ?? [];
  return new RequestValidationError(toValidationErrors(errors, validated, (bodyValidator?.schema ?? {}) as object, limit));
}
