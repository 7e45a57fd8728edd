import fs from 'node:fs';
import type { Ajv, ErrorObject, Options as AjvOptions } from 'ajv';
import {
  OpenAPIBackend,
  OpenAPIRouter,
  OpenAPIValidator,
  type Document,
  type Operation,
  type ParsedRequest,
  type Request,
  type ValidationContext,
  type ValidationResult,
} from 'openapi-backend';
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

/** No query string, no cookie, the body already parsed (or none): the requests the lean paths below handle. */
function isPlain(req: Request): boolean {
  const { query, body, headers = {} } = req;
  return (
    (query === undefined || query === '' || (typeof query === 'object' && Object.keys(query).length === 0)) &&
    (body === undefined || body === null || typeof body === 'object') &&
    headers.cookie === undefined &&
    headers.Cookie === undefined
  );
}

/** A path template's parameter names and the pattern that captures them. */
interface PathTemplate {
  pattern: RegExp;
  names: string[];
}

/** A path template as openapi-backend matches it (`{name}` is one segment, the rest literal). */
function routePatternOf(path: string): RegExp {
  const literals = path.split(/\{[^}]+\}/).map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp(`^${literals.join('[^/]+')}$`);
}

/**
 * openapi-backend's router, with the same results (test/request-parsing.test.ts) at a fraction of the
 * cost: the operation list and each path pattern are built once (the library rebuilds them, through
 * lodash, several times per request), and plain requests (`isPlain`) are parsed directly.
 */
export class FastRouter extends OpenAPIRouter {
  private readonly operations: Operation[];
  private readonly byId: Map<string | undefined, Operation>;
  /** Templates, the most literal first: the library's order of specificity. */
  private readonly routes: { operation: Operation; pattern: RegExp }[];
  /** Capturing patterns, built on first use; null where the library's own rules apply (repeated names). */
  private readonly templates = new Map<string, PathTemplate | null>();

  constructor(options: ConstructorParameters<typeof OpenAPIRouter>[0]) {
    super(options);
    this.operations = super.getOperations();
    this.byId = new Map(this.operations.map((operation) => [operation.operationId, operation]));
    const literalLength = (path: string) => path.replace(/\{[^}]+\}/g, '').length;
    this.routes = this.operations
      .map((operation) => ({ operation, pattern: routePatternOf(operation.path) }))
      .sort((a, b) => literalLength(b.operation.path) - literalLength(a.operation.path));
  }

  override getOperations(): Operation[] {
    return this.operations;
  }

  override getOperation(operationId: string): Operation | undefined {
    return this.byId.get(operationId);
  }

  /** Exact path first, then templates by specificity; `404-…`/`405-…` errors when strict, as the library's. */
  override matchOperation(req: Request): Operation | undefined;
  override matchOperation(req: Request, strict: boolean): Operation;
  override matchOperation(req: Request, strict?: boolean): Operation | undefined {
    const { path, method } = this.normalizeRequest(req);
    const normalizedPath = this.normalizePath(path);
    const exact = this.operations.find((op) => op.path === normalizedPath && op.method === method);
    if (exact) return exact;
    const candidates = this.routes.filter((route) => route.pattern.test(normalizedPath));
    if (candidates.length === 0) {
      if (strict) throw Error('404-notFound: no route matches request');
      return undefined;
    }
    const match = candidates.find((route) => route.operation.method === method)?.operation;
    if (!match && strict) throw Error('405-methodNotAllowed: this method is not registered for the route');
    return match;
  }

  /**
   * The library parses every request four times (routing, after routing, in validation, after
   * coercion) through lodash, the cookie and query-string parsers and a path template compiled anew;
   * a plain request gets the same result directly, anything else goes through the library's parser.
   */
  override parseRequest(req: Request, operation?: Operation): ParsedRequest {
    const template = operation ? this.templateOf(operation.path) : undefined;
    if (!isPlain(req) || template === null) return super.parseRequest(req, operation);
    const { body, headers: rawHeaders = {} } = req;
    const headers: Record<string, string | string[]> = {};
    for (const name in rawHeaders) headers[name.toLowerCase()] = rawHeaders[name]!;
    let path = req.path?.trim() || '';
    if (!path.startsWith('/')) path = `/${path}`;
    path = path.split('?')[0]!;
    let params: Record<string, string> = {};
    if (template) {
      const match = template.pattern.exec(this.normalizePath(path));
      if (match) {
        params = {};
        template.names.forEach((name, i) => (params[name] = decodeURIComponent(match[i + 1]!)));
      }
    }
    return { ...req, path, method: req.method.trim().toLowerCase(), params, headers, query: {}, cookies: {}, requestBody: body };
  }

  /**
   * The library's query parsing (`qs`), except that a parameter repeated more than `qs`'s `arrayLimit`
   * (20) times stays a list: `qs` makes it an object `{0: …, 1: …}`, which a repeatable parameter
   * allowing more (`id`, up to 100) would refuse.
   */
  override parseRequestQuery(req: Request): { [key: string]: unknown } {
    const query = super.parseRequestQuery(req);
    for (const [name, value] of Object.entries(query)) {
      if (value === null || typeof value !== 'object' || Array.isArray(value)) continue;
      const values = Object.values(value);
      if (Object.keys(value).every((key, i) => key === String(i))) query[name] = values;
    }
    return query;
  }

  /** The path parameters' pattern, built as `bath` (the library's parser) builds it. */
  private templateOf(path: string): PathTemplate | null {
    let template = this.templates.get(path);
    if (template === undefined) {
      const names = [...path.matchAll(/\{([A-Za-z0-9_-]+)\}/g)].map((m) => m[1]!);
      template =
        new Set(names).size === names.length
          ? { pattern: new RegExp(`^${path.replace(/\{[A-Za-z0-9_-]+\}/g, '([^\\/]*)')}$`), names }
          : null;
      this.templates.set(path, template);
    }
    return template;
  }
}

/**
 * openapi-backend's request validation with numeric parameters checked as written (`numericParameterErrors`),
 * and, for plain requests of a known operation, without the lodash passes and the checks that only apply
 * to query strings and unparsed bodies: the same compiled validators, the same result.
 */
export class FastValidator extends OpenAPIValidator {
  /** One Ajv per validation context and options (see `getAjv`). */
  private ajvs?: Map<string, Ajv>;

  /**
   * The library builds two new Ajv instances for every schema it compiles (its own, then ours from
   * `customizeAjv`), and building one (formats, keywords, the meta-schema that checks each schema) cost
   * more than most operations' schemas: 2.4 s of a server's 5.8 s start. Instances with the same
   * context and options are interchangeable, so each is built once and compiles all their schemas.
   */
  override getAjv(validationContext: ValidationContext, opts: AjvOptions = {}): Ajv {
    this.ajvs ??= new Map();
    const key = `${validationContext} ${JSON.stringify(opts)}`;
    let ajv = this.ajvs.get(key);
    if (!ajv) {
      ajv = super.getAjv(validationContext, opts);
      this.ajvs.set(key, ajv);
    }
    return ajv;
  }

  override validateRequest(req: Request, operation?: Operation | string): ValidationResult<Request> {
    const page = typeof operation === 'string' ? this.router.getOperation(operation) : operation;
    if (page && isBrowserPage(page)) req = withDeclaredQueryOnly(this.router, req, page);
    if (typeof operation !== 'object' || !operation.operationId || !isPlain(req)) return this.validateStrictly(req, operation);
    const coerced: Record<string, unknown> = { ...req };
    const errors: ErrorObject[] = [];
    const validators = this.getRequestValidatorsForOperation(operation.operationId) ?? [];
    const { params, query, headers, cookies, requestBody } = this.router.parseRequest(req, operation);
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
      else if (this.coerceTypes) {
        coerced.query = parameters.query;
        coerced.params = parameters.path;
      }
    }
    return { valid: errors.length === 0, coerced: coerced as unknown as Request, errors: errors.length === 0 ? null : errors };
  }

  /** The library's own validation, with the numeric parameters' text checked too. */
  private validateStrictly(req: Request, operation?: Operation | string): ValidationResult<Request> {
    const result = super.validateRequest(req, operation);
    const op = typeof operation === 'string' ? this.router.getOperation(operation) : (operation ?? this.router.matchOperation(req));
    if (!op) return result;
    const { params, query } = this.router.parseRequest(req, op);
    const errors = numericParameterErrors(op, { path: params, query });
    if (errors.length === 0) return result;
    return { ...result, valid: false, errors: [...(result.errors ?? []), ...errors] };
  }
}

/** A page for people (`x-browser-page: true`): links to it carry whatever query a newsletter or a cache-buster adds. */
export function isBrowserPage(operation: Operation): boolean {
  return (operation as { 'x-browser-page'?: unknown })['x-browser-page'] === true;
}

/**
 * The request with only the query parameters its operation declares: a page ignores the others
 * (`/?utm_source=…`, `/console/console.js?v=2`) where an API operation refuses them (422), and its
 * handler, which reads the validated request, never sees them.
 */
function withDeclaredQueryOnly(router: OpenAPIRouter, req: Request, operation: Operation): Request {
  if (req.query === undefined || req.query === '' || (typeof req.query === 'object' && Object.keys(req.query).length === 0)) return req;
  const declared = new Set(
    ((operation.parameters ?? []) as { in?: string; name?: string }[]).filter((p) => p.in === 'query').map((p) => p.name),
  );
  const query = Object.fromEntries(Object.entries(router.parseRequestQuery(req)).filter(([name]) => declared.has(name)));
  return { ...req, query: query as Request['query'] };
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

/** The contract as read, with the router and the compiled request validators built from it. */
interface CompiledContract {
  document: Document;
  router: FastRouter;
  validator: FastValidator;
}

/**
 * Read, routed and compiled once per process (compiling every request validator takes over a second):
 * each app of the process (the tests make hundreds) shares them, and they hold no per-app state.
 */
let compiledContract: CompiledContract | undefined;

function backendFor(document: Document): OpenAPIBackend {
  return new OpenAPIBackend({
    definition: document,
    strict: true,
    coerceTypes: true,
    // "quick" skips openapi-backend's definition check, which knows only OpenAPI 3.0 (ours is 3.1;
    // `redocly lint` checks it in CI), and compiles validators on demand rather than one per response
    // status that we never use; the request validators are compiled below, before the first request.
    // It also dereferences the same document object only once (the library caches by identity).
    quick: true,
    customizeAjv: customizeAjv as never,
  });
}

function compileContract(api: OpenAPIBackend, document: Document): CompiledContract {
  const router = new FastRouter({ definition: api.definition, apiRoot: api.apiRoot, ignoreTrailingSlashes: api.ignoreTrailingSlashes });
  const validator = new FastValidator({
    definition: api.definition,
    ajvOpts: api.ajvOpts,
    customizeAjv: api.customizeAjv,
    router,
    lazyCompileValidators: true,
    coerceTypes: api.coerceTypes,
  });
  for (const operation of router.getOperations()) validator.getRequestValidatorsForOperation(operation.operationId!);
  return { document, router, validator };
}

/** Creates the router/validator for the contract; handlers are registered by the caller. */
export async function createOpenApiBackend(): Promise<OpenAPIBackend> {
  const document = compiledContract?.document ?? loadSpec();
  const api = backendFor(document);
  await api.init();
  compiledContract ??= compileContract(api, document);
  // The one place our router and validator replace the library's (its public `router` and `validator`).
  api.router = compiledContract.router;
  api.validator = compiledContract.validator;
  return api;
}
