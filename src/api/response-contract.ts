import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { createAjv } from './ajv.ts';
import { loadSpec } from './openapi.ts';

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

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];
const SPEC_ID = 'openapi';

/** JSON pointer segment, URI-escaped for a `$ref` fragment. */
const pointerSegment = (segment: string) => encodeURIComponent(segment.replace(/~/g, '~0').replace(/\//g, '~1'));

interface Route {
  operationId: string;
  method: string;
  template: string;
  pattern: RegExp;
  literalLength: number;
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
  private readonly routes: Route[];
  private readonly ajv = createAjv();
  private readonly headerAjv = createAjv({ coerceTypes: true });
  private readonly validators = new Map<string, ValidateFunction>();

  constructor(spec: object = loadSpec()) {
    this.spec = spec as Node;
    this.ajv.addSchema(this.spec, SPEC_ID);
    this.headerAjv.addSchema(this.spec, SPEC_ID);
    const routes: Route[] = [];
    for (const [template, item] of Object.entries(this.spec.paths as Record<string, Node>)) {
      for (const method of METHODS) {
        const op = item[method] as Node | undefined;
        if (!op) continue;
        const pattern = new RegExp(
          `^${template
            .split(/\{[^}]+\}/)
            .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
            .join('[^/]+')}$`,
        );
        routes.push({
          operationId: String(op.operationId),
          method: method.toUpperCase(),
          template,
          pattern,
          literalLength: template.replace(/\{[^}]+\}/g, '').length,
          responses: (op.responses as Node) ?? {},
          pointer: `/paths/${pointerSegment(template)}/${method}/responses`,
        });
      }
    }
    // As the server routes: an exact path before a template, then the most literal template.
    const isLiteral = (route: Route) => Number(!route.template.includes('{'));
    this.routes = routes.sort((a, b) => isLiteral(b) - isLiteral(a) || b.literalLength - a.literalLength);
  }

  /** The operation a request was routed to, as the server routes it. */
  routeOf(method: string, path: string): Route | undefined {
    const normalized = path.length > 1 ? path.replace(/\/+$/, '') : path;
    const upper = method.toUpperCase() === 'HEAD' ? 'GET' : method.toUpperCase();
    return this.routes.find((route) => route.method === upper && route.pattern.test(normalized));
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

/**
 * Wraps a Node request listener so that every response it writes is checked with `contract` once
 * finished; each violation goes to `report`. Works below Koa, so responses written directly on the
 * socket's response (the live stream) are checked too; a text/event-stream body is not kept.
 */
export function checkingResponses(
  listener: (req: IncomingMessage, res: ServerResponse) => void,
  contract: ResponseContract,
  report: (violation: ContractViolation) => void,
): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    let status = 0;
    let headers: Record<string, string | string[] | number | undefined> = {};
    let chunks: Buffer[] | undefined = [];
    let size = 0;
    const writeHead = res.writeHead;
    res.writeHead = function (this: ServerResponse, code: number, ...rest: unknown[]) {
      status = code;
      const given = rest.find((arg) => arg && typeof arg === 'object') as Record<string, string | string[] | number> | undefined;
      headers = { ...this.getHeaders(), ...(Array.isArray(given) ? {} : given) } as typeof headers;
      if (mediaTypeOf(headers['content-type'] ?? headers['Content-Type']) === 'text/event-stream') {
        // A stream may never finish: judged by its status and headers now.
        chunks = undefined;
        checkOnce();
      }
      return writeHead.call(this, code, ...(rest as []));
    } as typeof res.writeHead;
    const keep = (chunk: unknown, encoding?: unknown) => {
      if (!chunks || chunk === undefined || chunk === null || typeof chunk === 'function') return;
      const buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
      size += buffer.length;
      if (size > MAX_CHECKED_BODY_BYTES) chunks = undefined;
      else chunks.push(buffer);
    };
    const write = res.write;
    res.write = function (this: ServerResponse, chunk: unknown, ...rest: unknown[]) {
      keep(chunk, rest[0]);
      return (write as (...args: unknown[]) => boolean).call(this, chunk, ...rest);
    } as typeof res.write;
    const end = res.end;
    res.end = function (this: ServerResponse, chunk?: unknown, ...rest: unknown[]) {
      keep(chunk, rest[0]);
      return (end as (...args: unknown[]) => ServerResponse).call(this, chunk, ...rest);
    } as typeof res.end;
    let checked = false;
    const checkOnce = () => {
      if (checked) return;
      checked = true;
      if (!status) status = res.statusCode;
      const violations = contract.check({
        method: req.method ?? 'GET',
        path: (req.url ?? '/').split('?')[0]!,
        status,
        headers,
        body: chunks ? Buffer.concat(chunks) : undefined,
      });
      violations.forEach(report);
    };
    res.once('finish', checkOnce);
    listener(req, res);
  };
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

/**
 * Makes `app.callback()` (what `http.createServer`, `app.listen` and supertest use) check every
 * response against the spec, reporting to `violationSink`.
 */
export function checkResponsesOf(app: { callback(): (req: IncomingMessage, res: ServerResponse) => unknown }): void {
  const callback = app.callback.bind(app);
  app.callback = () => checkingResponses(callback() as (req: IncomingMessage, res: ServerResponse) => void, sharedResponseContract(), (v) => violationSink.report(v));
}
