import type { Metrics } from '../../observability/metrics.ts';
import { API_REFERENCE_CSP, API_REFERENCE_HTML, redocBundle, specText } from '../../observability/api-reference.ts';
import type { OperationHandlers } from '../context.ts';
import { etagOf, respondCacheable } from '../http-caching.ts';

/** Handlers of the `operations` tag: what the people running the service use. */
export function operationsHandlers(metrics: Metrics): OperationHandlers {
  // Fixed for the life of the process: validators made once, revalidated by clients on each load.
  const referenceEtag = etagOf(API_REFERENCE_HTML);
  let scriptEtag: string | undefined;
  let specEtag: string | undefined;
  return {
    async getMetrics(_operation, ctx) {
      ctx.status = 200;
      ctx.type = metrics.registry.contentType;
      ctx.body = await metrics.registry.metrics();
    },
    getApiReference(_operation, ctx) {
      ctx.set('Content-Security-Policy', API_REFERENCE_CSP);
      respondCacheable(ctx, { type: 'text/html; charset=utf-8', body: API_REFERENCE_HTML, etag: referenceEtag, cacheControl: 'no-cache' });
    },
    getApiReferenceScript(_operation, ctx) {
      const body = redocBundle();
      scriptEtag ??= etagOf(body);
      respondCacheable(ctx, { type: 'text/javascript; charset=utf-8', body, etag: scriptEtag, cacheControl: 'public, max-age=3600' });
    },
    getOpenApiDocument(_operation, ctx) {
      const body = specText();
      specEtag ??= etagOf(body);
      respondCacheable(ctx, { type: 'application/yaml; charset=utf-8', body, etag: specEtag, cacheControl: 'no-cache' });
    },
  };
}
