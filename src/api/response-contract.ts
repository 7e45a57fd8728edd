import { Stream } from 'node:stream';
import type { ErrorObject, ValidateFunction } from 'ajv';
import type { Middleware } from 'koa';
import type { Document, Operation } from 'openapi-backend';
import { createAjv } from './ajv.ts';
import { FastRouter, loadSpec } from './openapi.ts';

/**
 * Checks responses against `spec/openapi.yaml` itself (no second copy of the contract): the status
 * is documented for the operation, the Content-Type is one the spec gives for that status, the body
 * is valid against that media type's schema (the same Ajv setup as request validation), and the
 * documented headers are present when required and valid. Used by the tests on every response they
 * receive (`test/helpers/response-contract.ts`) and by a server started with `RESPONSE_VALIDATION=log`.
 */

type Node = Record<string, unknown>;

/** One response as it went out. */
export interface SentResponse {
  method: string;
  path: string;
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  /** The body's bytes; undefined when not kept (a stream such as text/event-stream). */
  body: Buffer | undefined;
}

/** A response the spec does not describe, named by operation, status and what is wrong. */
export interface ContractViolation {
  operation: string;
  method: string;
  path: string;
  status: number;
  problem: string;
}

const SPEC_ID = 'openapi';

/** JSON pointer segment, URI-escaped for a `$ref` fragment. */
const pointerSegment = (segment: string) => encodeURIComponent(segment.replace(/~/g, '~0').replace(/\//g, '~1'));

interface Route {
  operationId: string;
  responses: Node;
  /** JSON pointer of the operation's `responses`, for `$ref`s into the spec. */
  pointer: string;
}

/** Media type without parameters, lower case. */
function mediaTypeOf(header: unknown): string {
  const value = Array.isArray(header) ? header[0] : header;
  return String(value ?? '').split(';')[0]!.trim().toLowerCase();
}

function describeErrors(errors: ErrorObject[] | null | undefined): string {
  return (errors ?? [])
    .slice(0, 5)
    .map((e) => `${e.instancePath || '(root)'} ${e.message ?? e.keyword}${e.params && 'additionalProperty' in e.params ? ` '${String(e.params.additionalProperty)}'` : ''}`)
    .join('; ');
}

export class ResponseContract {
  private readonly spec: Node;
  /** The server's own router, over the same spec: a response is judged by the operation that served it. */
  private readonly router: FastRouter;
  private readonly ajv = createAjv();
  private readonly headerAjv = createAjv({ coerceTypes: true });
  private readonly validators = new Map<string, ValidateFunction>();

  constructor(spec: object = loadSpec()) {
    this.spec = spec as Node;
    this.router = new FastRouter({ definition: spec as Document });
    this.ajv.addSchema(this.spec, SPEC_ID);
    this.headerAjv.addSchema(this.spec, SPEC_ID);
  }

  /** The operation a request was routed to, as the server routes it (HEAD as GET). */
  routeOf(method: string, path: string): Route | undefined {
    const operation: Operation | undefined = this.router.matchOperation({ method: method.toUpperCase() === 'HEAD' ? 'GET' : method, path, headers: {} });
    if (!operation) return undefined;
    return {
      operationId: String(operation.operationId),
      responses: (operation.responses as Node | undefined) ?? {},
      pointer: `/paths/${pointerSegment(operation.path)}/${operation.method}/responses`,
    };
  }

  /** Follows `$ref`s within the spec; returns the node and its JSON pointer. */
  private resolve(node: unknown, pointer: string): { node: Node; pointer: string } {
    let current = node as Node;
    let at = pointer;
    while (current && typeof current.$ref === 'string') {
      const ref = current.$ref as string;
      at = ref.slice(1).split('/').map((s) => pointerSegment(decodeURIComponent(s).replace(/~1/g, '/').replace(/~0/g, '~'))).join('/');
      current = ref
        .slice(2)
        .split('/')
        .reduce((n: Node, part) => n[part.replace(/~1/g, '/').replace(/~0/g, '~')] as Node, this.spec);
    }
    return { node: current, pointer: at };
  }

  private validator(ajv: typeof this.ajv, pointer: string): ValidateFunction {
    const key = `${ajv === this.ajv ? 'b' : 'h'}${pointer}`;
    let validate = this.validators.get(key);
    if (!validate) {
      const ref = { $ref: `${SPEC_ID}#${pointer}` };
      validate = ajv.compile(ajv === this.ajv ? ref : { type: 'object', properties: { value: ref } });
      this.validators.set(key, validate);
    }
    return validate;
  }

  /** What is wrong with `response` (empty when the spec describes it). */
  check(response: SentResponse): ContractViolation[] {
    const route = this.routeOf(response.method, response.path);
    const violation = (problem: string): ContractViolation => ({
      operation: route?.operationId ?? '(no operation)',
      method: response.method,
      path: response.path,
      status: response.status,
      problem,
    });
    const headers: Record<string, string | string[] | number | undefined> = {};
    for (const [name, value] of Object.entries(response.headers)) headers[name.toLowerCase()] = value;
    const body = response.body;
    const hasBody = body !== undefined ? body.length > 0 : headers['content-type'] !== undefined;

    if (!route) {
      // No operation: the router's own 404/405, rendered as the contract's error body.
      if (response.status !== 404 && response.status !== 405) return [violation(`status ${response.status} for a path no operation serves (only 404 or 405)`)];
      return this.checkBody(response.method, body, mediaTypeOf(headers['content-type']), '/components/schemas/ErrorBody', violation);
    }

    const status = String(response.status);
    const documented = Object.keys(route.responses);
    const key = documented.find((k) => k === status) ?? documented.find((k) => k.toUpperCase() === `${status[0]}XX`) ?? documented.find((k) => k === 'default');
    if (!key) return [violation(`status ${status} is not documented (documented: ${documented.join(', ')})`)];
    const { node: spec, pointer } = this.resolve(route.responses[key], `${route.pointer}/${pointerSegment(key)}`);
    const problems: ContractViolation[] = [];

    for (const [name, rawHeader] of Object.entries((spec.headers as Node | undefined) ?? {})) {
      const { node: header, pointer: headerPointer } = this.resolve(rawHeader, `${pointer}/headers/${pointerSegment(name)}`);
      const value = headers[name.toLowerCase()];
      if (value === undefined) {
        if (header.required === true) problems.push(violation(`header ${name} is required for ${status} but missing`));
        continue;
      }
      if (!header.schema) continue;
      // Header values are text: validated through a holder, coerced as the schema's type asks.
      const validate = this.validator(this.headerAjv, `${headerPointer}/schema`);
      const holder = { value: Array.isArray(value) ? value.join(', ') : String(value) };
      if (!validate(holder)) problems.push(violation(`header ${name}: ${describeErrors(validate.errors)}`));
    }

    const content = spec.content as Node | undefined;
    if (!hasBody || response.method.toUpperCase() === 'HEAD') {
      return problems;
    }
    if (!content) return [...problems, violation(`a body was sent but ${status} documents none`)];
    const mediaType = mediaTypeOf(headers['content-type']);
    const mediaKey = Object.keys(content).find((k) => k.toLowerCase() === mediaType) ??
      Object.keys(content).find((k) => k.endsWith('/*') && mediaType.startsWith(k.slice(0, -1))) ??
      Object.keys(content).find((k) => k === '*/*');
    if (!mediaKey) {
      return [...problems, violation(`Content-Type ${mediaType || '(none)'} is not documented for ${status} (documented: ${Object.keys(content).join(', ')})`)];
    }
    const media = content[mediaKey] as Node;
    if (!media.schema) return problems;
    return [...problems, ...this.checkBody(response.method, body, mediaType, `${pointer}/content/${pointerSegment(mediaKey)}/schema`, violation)];
  }

  private checkBody(
    method: string,
    body: Buffer | undefined,
    mediaType: string,
    schemaPointer: string,
    violation: (problem: string) => ContractViolation,
  ): ContractViolation[] {
    if (body === undefined || method.toUpperCase() === 'HEAD') return [];
    let value: unknown;
    if (mediaType === 'application/json' || mediaType.endsWith('+json')) {
      try {
        value = JSON.parse(body.toString('utf8'));
      } catch {
        return [violation(`the ${mediaType} body is not JSON`)];
      }
    } else {
      value = body.toString('utf8');
    }
    const validate = this.validator(this.ajv, schemaPointer);
    if (validate(value)) return [];
    return [violation(`body (${mediaType || 'no Content-Type'}) does not match the spec: ${describeErrors(validate.errors)}`)];
  }
}

/** Bodies larger than this are checked for status and headers only. */
const MAX_CHECKED_BODY_BYTES = 8 * 1024 * 1024;

const isJsonMediaType = (mediaType: string) => mediaType === 'application/json' || mediaType.endsWith('+json');

/**
 * A Koa middleware, the app's first, that checks each response against `contract` once it has gone out
 * and reports each violation: the status and headers as sent, the body as Koa serialises `ctx.body`.
 * A response written past Koa (`ctx.respond = false`: the export, a live stream) is judged by its status
 * and headers, an event stream as soon as they are out (it may never finish).
 */
export function checkResponses(contract: ResponseContract, report: (violation: ContractViolation) => void): Middleware {
  return async (ctx, next) => {
    let body: Buffer | undefined;
    let checked = false;
    const check = () => {
      if (checked) return;
      checked = true;
      const response = { method: ctx.method, path: (ctx.req.url ?? '/').split('?')[0]!, status: ctx.res.statusCode, headers: ctx.res.getHeaders(), body };
      const violations = contract.check(response);
      const mediaType = mediaTypeOf(response.headers['content-type']);
      // Its bytes are not seen here: a JSON body must go through Koa to be checked.
      if (ctx.respond === false && isJsonMediaType(mediaType)) {
        violations.push({ operation: contract.routeOf(ctx.method, response.path)?.operationId ?? '(no operation)', ...response, problem: 'a JSON body written past Koa (ctx.respond = false) cannot be checked' });
      }
      violations.forEach(report);
    };
    ctx.res.once('finish', check);
    await next();
    if (ctx.respond === false) {
      if (ctx.res.headersSent && mediaTypeOf(ctx.res.getHeader('content-type')) === 'text/event-stream') check();
      return;
    }
    // Koa sends no body for these statuses, whatever `ctx.body` holds.
    body = ctx.status === 204 || ctx.status === 205 || ctx.status === 304 ? Buffer.alloc(0) : sentBodyOf(ctx.body);
  };
}

/** The bytes Koa sends for `body` (a string or Buffer as is, anything else as JSON); undefined when not kept. */
function sentBodyOf(body: unknown): Buffer | undefined {
  if (body === null || body === undefined) return undefined;
  if (body instanceof Stream || body instanceof Blob || body instanceof ReadableStream || body instanceof Response) return undefined;
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  return bytes.length > MAX_CHECKED_BODY_BYTES ? undefined : bytes;
}

/** The one line a server started with `RESPONSE_VALIDATION=log` writes to stderr for each violation. */
export const VIOLATION_MARKER = 'RESPONSE CONTRACT VIOLATION ';

/** The message a failing test shows for a violation. */
export function describeViolation(v: ContractViolation): string {
  return `${v.method} ${v.path} (${v.operation}) answered ${v.status}: ${v.problem}`;
}

/**
 * Where violations go: a line on stderr (`VIOLATION_MARKER` + JSON), which the tests read from the
 * server processes they start; in the test process itself the tests replace `report`.
 */
export const violationSink = {
  report(violation: ContractViolation): void {
    process.stderr.write(`${VIOLATION_MARKER}${JSON.stringify(violation)}\n`);
  },
};

let sharedContract: ResponseContract | undefined;

/** The contract compiled once per process (every app built in it shares the compiled validators). */
export function sharedResponseContract(): ResponseContract {
  return (sharedContract ??= new ResponseContract());
}

/** `checkResponses` with the process's shared contract, reporting to `violationSink` (RESPONSE_VALIDATION=log). */
export function checkResponsesAgainstSpec(): Middleware {
  return checkResponses(sharedResponseContract(), (violation) => violationSink.report(violation));
}
