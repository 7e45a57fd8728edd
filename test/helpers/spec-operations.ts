import { loadSpec } from '../../src/api/openapi.ts';

/**
 * The operations of the contract, read from `spec/openapi.yaml`: tests that must cover every
 * operation (hostile input, security) iterate over this list, so an operation added to the spec is
 * covered without touching the tests — or fails them loudly when it needs something they lack.
 */
export interface SpecParameter {
  name: string;
  in: 'path' | 'query' | 'header' | 'cookie';
  required?: boolean;
  schema?: Record<string, unknown>;
}

export interface SpecOperation {
  operationId: string;
  method: string;
  path: string;
  /** Alternatives: the caller must satisfy one entry; [] or [{}] means no credential. */
  security: Record<string, string[]>[];
  parameters: SpecParameter[];
  losslessBody: boolean;
  /** `x-browser-page: true`: a page for people, which ignores query parameters it does not declare. */
  browserPage: boolean;
  permission?: string;
  /** `x-org-permission`: what the caller's role in the organization it acts in must allow. */
  orgPermission?: string;
  /** The statuses the spec documents. */
  statuses: string[];
  /** A response is a stream (`text/event-stream`) that stays open. */
  streams: boolean;
  hasBody: boolean;
  bodyRequired: boolean;
  /** The first example of the JSON request body the spec gives, if any. */
  bodyExample?: unknown;
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

type Node = Record<string, unknown>;

export function specOperations(): SpecOperation[] {
  const spec = loadSpec() as unknown as Node;
  const components = spec.components as Node;
  const resolve = (node: unknown): Node => {
    let current = node as Node;
    while (current && typeof current.$ref === 'string') {
      const parts = (current.$ref as string).replace(/^#\/components\//, '').split('/');
      current = parts.reduce((n: Node, part) => n[part] as Node, components);
    }
    return current;
  };
  const globalSecurity = (spec.security as Record<string, string[]>[] | undefined) ?? [];
  const operations: SpecOperation[] = [];
  for (const [path, item] of Object.entries(spec.paths as Record<string, Node>)) {
    const shared = ((item.parameters as unknown[]) ?? []).map(resolve);
    for (const method of METHODS) {
      const op = item[method] as Node | undefined;
      if (!op) continue;
      const parameters = [...shared, ...((op.parameters as unknown[]) ?? []).map(resolve)] as unknown as SpecParameter[];
      const body = op.requestBody ? resolve(op.requestBody) : undefined;
      const media = (body?.content as Node | undefined)?.['application/json'] as Node | undefined;
      let bodyExample: unknown = media?.example;
      if (bodyExample === undefined && media?.examples) {
        const first = Object.values(media.examples as Record<string, Node>)[0];
        bodyExample = first ? resolve(first).value : undefined;
      }
      operations.push({
        operationId: op.operationId as string,
        method: method.toUpperCase(),
        path,
        security: (op.security as Record<string, string[]>[] | undefined) ?? globalSecurity,
        parameters,
        losslessBody: op['x-lossless-body'] === true,
        browserPage: op['x-browser-page'] === true,
        permission: op['x-permission'] as string | undefined,
        orgPermission: op['x-org-permission'] as string | undefined,
        statuses: Object.keys((op.responses as Node) ?? {}),
        streams: Object.values((op.responses as Record<string, Node>) ?? {}).some((r) => Boolean((resolve(r).content as Node | undefined)?.['text/event-stream'])),
        hasBody: Boolean(body),
        bodyRequired: Boolean(body?.required),
        bodyExample,
      });
    }
  }
  return operations;
}

/** The security schemes an operation accepts (empty: no credential needed). */
export function schemesOf(operation: SpecOperation): string[] {
  return [...new Set(operation.security.flatMap((alternative) => Object.keys(alternative)))];
}

/** The `METRICS_TOKEN` of apps built for tests that call `/metrics` with credentials. */
export const TEST_METRICS_TOKEN = 'test-metrics-token-0123456789abcdef';

/** Schemes whose credential belongs to a user (and can be revoked); the others are configuration. */
export const USER_SCHEMES = ['AccessToken', 'APIKeyHeader'];

/** The credentials of a test user, by kind. */
export interface TestCredentials {
  accessToken: string;
  sessionApiKey: string;
}

/**
 * The request headers that satisfy `scheme` for a user. A scheme the tests do not know fails
 * loudly: whoever adds a scheme to the spec adds it here, so no operation is silently untested.
 */
export function credentialHeaders(scheme: string, user: TestCredentials): Record<string, string> {
  switch (scheme) {
    case 'AccessToken':
      return { 'X-Access-Token': user.accessToken };
    case 'APIKeyHeader':
      return { 'X-Session-API-Key': user.sessionApiKey };
    case 'MetricsToken':
      // Not a user's credential: the one token of the configuration (build the app with it).
      return { Authorization: `Bearer ${TEST_METRICS_TOKEN}` };
    default:
      throw new Error(`unknown scheme ${scheme}: add it to credentialHeaders in test/helpers/spec-operations.ts`);
  }
}

/** `/a/{id}/b` with its path parameters filled in (each value URI-encoded unless `raw`). */
export function fillPath(path: string, values: Record<string, string>, raw = false): string {
  return path.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const value = values[name];
    if (value === undefined) throw new Error(`no value for path parameter ${name} of ${path}`);
    return raw ? value : encodeURIComponent(value);
  });
}
