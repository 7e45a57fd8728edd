import fs from 'node:fs';
import path from 'node:path';
import type { Options as AjvOptions } from 'ajv';
import { OpenAPIBackend, type Document } from 'openapi-backend';
import { parse } from 'yaml';
import { createAjv } from './ajv.ts';
import { PACKAGE_ROOT } from '../package-root.ts';

/** The contract. The server loads this file itself; there is no second copy of it in code. */
export const SPEC_PATH = path.join(PACKAGE_ROOT, 'spec', 'openapi.yaml');

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

/** Request validation writes schema defaults into the request, so handlers see complete events. */
function customizeAjv(_draft07: unknown, options: AjvOptions) {
  return createAjv({ ...options, useDefaults: true });
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
  for (const operation of operations) {
    api.validator.getRequestValidatorsForOperation(operation.operationId!);
  }
  return api;
}
