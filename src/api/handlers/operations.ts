import type { Metrics } from '../../observability/metrics.ts';
import { API_REFERENCE_CSP, API_REFERENCE_HTML, redocBundle, specText } from '../../observability/api-reference.ts';
import type { OperationHandlers } from '../context.ts';

/** Handlers of the `operations` tag: what the people running the service use. */
export function operationsHandlers(metrics: Metrics): OperationHandlers {
  return {
    async getMetrics(_operation, ctx) {
      ctx.status = 200;
      ctx.type = metrics.registry.contentType;
      ctx.body = await metrics.registry.metrics();
    },
    getApiReference(_operation, ctx) {
      ctx.status = 200;
      ctx.type = 'text/html; charset=utf-8';
      ctx.set('Content-Security-Policy', API_REFERENCE_CSP);
      ctx.body = API_REFERENCE_HTML;
    },
    getApiReferenceScript(_operation, ctx) {
      ctx.status = 200;
      ctx.type = 'text/javascript; charset=utf-8';
      ctx.set('Cache-Control', 'public, max-age=3600');
      ctx.body = redocBundle();
    },
    getOpenApiDocument(_operation, ctx) {
      ctx.status = 200;
      ctx.type = 'application/yaml; charset=utf-8';
      ctx.body = specText();
    },
  };
}
