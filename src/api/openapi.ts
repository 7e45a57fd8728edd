import fs from 'node:fs';
import type { ErrorObject, Options as AjvOptions } from 'ajv';
import { OpenAPIBackend, type Document } from 'openapi-backend';
import { parse } from 'yaml';
import { createAjv } from './ajv.ts';
import { SPEC_PATH } from '../package-root.ts';

/** Ajv's discriminator keyword rejects `mapping`, which the spec keeps for the generated types. */
function stripDiscriminatorMappings(node: unknown): void {
  if (Array.isArray(node)) {
    node.forEach(stripDiscriminatorMappings);
  } else if (node && typeof node === 'object') {
    const record = node as Record<string, unknown>;
    const discriminator = record.discriminator as Record<string, unknown> | undefined;
    if (discriminator && typeof discriminator === 'object') delete discriminator.mapping;
    Object.values(record).forEach(stripDiscriminatorMappings);
  }
}

/** Reads the contract and prepares it for the runtime validator. */
export function loadSpec(): Document {
  const document = parse(fs.readFileSync(SPEC_PATH, 'utf8')) as Document;
  stripDiscriminatorMappings(document);
  return document;
}

/**
 * Request validation writes schema defaults into the request, so handlers see complete events.
 * Parameters coerce to arrays too: a repeatable query parameter given once (`?kind=MessageEvent`)
 * arrives as a string.
 */
function customizeAjv(_draft07: unknown, options: AjvOptions) {
  return createAjv({ ...options, useDefaults: true, ...(options.coerceTypes === true ? { coerceTypes: 'array' as const } : {}) });
}

type Operation = ReturnType<OpenAPIBackend['getOperations']>[number];

/**
 * Same matching as openapi-backend's router (exact path first, then templates by specificity;
 * `404-…`/`405-…` errors), with each path template compiled to a RegExp once instead of on every
 * request for every operation.
 */
function useCompiledRoutes(api: OpenAPIBackend, operations: Operation[]): void {
  const literal = (path: string) => path.replace(/\{[^}]+\}/g, '').length;
  const routes = operations
    .map((operation) => ({
      operation,
      pattern: new RegExp(
        `^${operation.path
          .split(/\{[^}]+\}/)
          .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
          .join('[^/]+')}$`,
      ),
    }))
    .sort((a, b) => literal(b.operation.path) - literal(a.operation.path));
  const router = api.router;
  router.matchOperation = ((request: Parameters<typeof router.matchOperation>[0], strict?: boolean) => {
    const { path, method } = router.normalizeRequest(request);
    const normalizedPath = router.normalizePath(path);
    const exact = operations.find((op) => op.path === normalizedPath && op.method === method);
    if (exact) return exact;
    const candidates = routes.filter((route) => route.pattern.test(normalizedPath));
    if (candidates.length === 0) {
      if (strict) throw Error('404-notFound: no route matches request');
      return undefined;
    }
    const match = candidates.find((route) => route.operation.method === method)?.operation;
    if (!match && strict) throw Error('405-methodNotAllowed: this method is not registered for the route');
    return match;
  }) as typeof router.matchOperation;
}

type ParsedRequest = ReturnType<OpenAPIBackend['router']['parseRequest']>;
type RawRequest = Parameters<OpenAPIBackend['router']['parseRequest']>[0];

/**
 * openapi-backend parses every request four times (routing, after routing, in validation, after
 * coercion), each time through lodash, the cookie and query-string parsers and a path template
 * compiled anew. For the requests that need none of that (no query string, no cookie, the body
 * already parsed), this gives the same result directly: headers copied with lower-case names, the
 * path parameters decoded from a pattern built once per template (as `bath` builds it); every other
 * request goes through the library's own parser.
 */
/** No query string, no cookie, the body already parsed (or none): what the lean paths below handle. */
function isPlain(req: RawRequest): boolean {
  const { query, body, headers = {} } = req;
  return (
    (query === undefined || query === '' || (typeof query === 'object' && Object.keys(query).length === 0)) &&
    (body === undefined || body === null || typeof body === 'object') &&
    headers.cookie === undefined &&
    headers.Cookie === undefined
  );
}

function useLeanRequestParsing(api: OpenAPIBackend): void {
  const router = api.router;
  const parse = router.parseRequest.bind(router);
  const templates = new Map<string, { pattern: RegExp; names: string[] } | null>();
  const templateOf = (path: string) => {
    let template = templates.get(path);
    if (template === undefined) {
      const names = [...path.matchAll(/\{([A-Za-z0-9_-]+)\}/g)].map((m) => m[1]!);
      // Repeated names: the library's own rules apply.
      template =
        new Set(names).size === names.length
          ? { pattern: new RegExp(`^${path.replace(/\{[A-Za-z0-9_-]+\}/g, '([^\\/]*)')}$`), names }
          : null;
      templates.set(path, template);
    }
    return template;
  };
  router.parseRequest = ((req: RawRequest, operation?: Operation): ParsedRequest => {
    const template = operation ? templateOf(operation.path) : undefined;
    if (!isPlain(req) || template === null) return parse(req, operation);
    const { body, headers: rawHeaders = {} } = req;
    const headers: Record<string, string | string[]> = {};
    for (const name in rawHeaders) headers[name.toLowerCase()] = rawHeaders[name]!;
    let path = req.path?.trim() || '';
    if (!path.startsWith('/')) path = `/${path}`;
    path = path.split('?')[0]!;
    let params: Record<string, string> = {};
    if (template) {
      const match = template.pattern.exec(router.normalizePath(path));
      if (match) {
        params = {};
        template.names.forEach((name, i) => (params[name] = decodeURIComponent(match[i + 1]!)));
      }
    }
    return { ...req, path, method: req.method.trim().toLowerCase(), params, headers, query: {}, cookies: {}, requestBody: body };
  }) as typeof router.parseRequest;
}

type ValidationResult = ReturnType<OpenAPIBackend['validator']['validateRequest']>;

/**
 * openapi-backend's request validation, for plain requests (see `isPlain`) of a known operation,
 * without the lodash passes and the checks that only apply to query strings and unparsed bodies:
 * the same parameters go through the same compiled validators, with the same result. Anything else
 * goes through the library's own code.
 */
function useLeanRequestValidation(api: OpenAPIBackend): void {
  const validator = api.validator;
  const validate = withStrictNumbers(api, validator.validateRequest.bind(validator));
  validator.validateRequest = ((req: RawRequest, operation?: Operation | string): ValidationResult => {
    if (typeof operation !== 'object' || !operation.operationId || !isPlain(req)) return validate(req, operation);
    const coerced: Record<string, unknown> = { ...req };
    const errors: NonNullable<ValidationResult['errors']> = [];
    const validators = validator.getRequestValidatorsForOperation(operation.operationId) ?? [];
    const { params, query, headers, cookies, requestBody } = api.router.parseRequest(req, operation);
    const parameters: Record<string, unknown> = { path: params, query, header: headers, cookie: cookies };
    const rawContentType = headers['content-type'];
    const contentType = String((Array.isArray(rawContentType) ? rawContentType[0] : rawContentType) || '')
      .split(';')[0]!
      .trim()
      .toLowerCase();
    if (typeof requestBody === 'object' || contentType === 'application/json') parameters.requestBody = requestBody;
    // Before the validators coerce the parameters in place.
    errors.push(...numericParameterErrors(operation, parameters));
    for (const check of validators) {
      check(parameters);
      if (check.errors) errors.push(...check.errors);
      else if (validator.coerceTypes) {
        coerced.query = parameters.query;
        coerced.params = parameters.path;
      }
    }
    return { valid: errors.length === 0, coerced: coerced as unknown as RawRequest, errors: errors.length === 0 ? null : errors };
  }) as typeof validator.validateRequest;
}

/** A parameter's text as a JSON integer / number literal: no sign on zero, no leading zeros, no hex. */
const NUMERIC_TEXT: Record<string, RegExp> = {
  integer: /^(?:0|-?[1-9][0-9]*)$/,
  number: /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$/,
};

/**
 * Ajv's type coercion reads a query or path parameter as JavaScript's `Number()` does, so `0x10`
 * is 16, `1e-400` is 0, `-0` is 0 and `1e400` is Infinity. A numeric parameter must instead be
 * written as a plain decimal literal naming a finite number other than -0 (its bounds, which every
 * numeric parameter has in the spec, are checked by the schema); anything else is the schema's
 * own type error, so it renders as any other 422.
 */
function numericParameterErrors(operation: Operation, parts: Record<string, unknown>): ErrorObject[] {
  const errors: ErrorObject[] = [];
  for (const parameter of (operation.parameters ?? []) as { in?: string; name?: string; schema?: { type?: unknown } }[]) {
    const type = parameter.schema?.type;
    if ((type !== 'integer' && type !== 'number') || (parameter.in !== 'query' && parameter.in !== 'path')) continue;
    const location = parameter.in;
    const raw = (parts[location] as Record<string, unknown> | undefined)?.[parameter.name!];
    if (raw === undefined) continue;
    const texts = Array.isArray(raw) ? raw : [raw];
    const wellFormed = texts.every((text) => {
      if (typeof text !== 'string') return true; // already coerced by an earlier pass
      const value = Number(text);
      return NUMERIC_TEXT[type]!.test(text) && Number.isFinite(value) && !Object.is(value, -0);
    });
    if (wellFormed) continue;
    errors.push({
      instancePath: `/${location}/${parameter.name}`,
      schemaPath: `#/properties/${location}/properties/${parameter.name}/type`,
      keyword: 'type',
      params: { type },
      message: `must be ${type}`,
    });
  }
  return errors;
}

/** The library's request validation, with the numeric parameters' text checked as above. */
function withStrictNumbers(api: OpenAPIBackend, validate: OpenAPIBackend['validator']['validateRequest']) {
  return (req: RawRequest, operation?: Operation | string): ValidationResult => {
    const result = validate(req, operation);
    const op = typeof operation === 'string' ? api.router.getOperation(operation) : (operation ?? api.router.matchOperation(req));
    if (!op) return result;
    const { params, query } = api.router.parseRequest(req, op);
    const errors = numericParameterErrors(op, { path: params, query });
    if (errors.length === 0) return result;
    return { ...result, valid: false, errors: [...(result.errors ?? []), ...errors] };
  };
}

/** Creates the router/validator for the contract; handlers are registered by the caller. */
export async function createOpenApiBackend(): Promise<OpenAPIBackend> {
  const api = new OpenAPIBackend({
    definition: loadSpec(),
    strict: true,
    coerceTypes: true,
    // "quick" skips openapi-backend's definition check, which knows only OpenAPI 3.0 (ours is 3.1;
    // `redocly lint` checks it in CI), and compiles validators on demand rather than one per response
    // status that we never use; the request validators are compiled below, before the first request.
    quick: true,
    customizeAjv: customizeAjv as never,
  });
  await api.init();
  // The router rebuilds its operation list (a deep lodash pass over the spec) on every call, and
  // calls it several times per request; the definition never changes after init, so build it once.
  const operations = api.router.getOperations();
  const byId = new Map(operations.map((operation) => [operation.operationId, operation]));
  api.router.getOperations = () => operations;
  api.router.getOperation = (operationId: string) => byId.get(operationId);
  useCompiledRoutes(api, operations);
  useLeanRequestParsing(api);
  useLeanRequestValidation(api);
  for (const operation of operations) {
    api.validator.getRequestValidatorsForOperation(operation.operationId!);
  }
  return api;
}
