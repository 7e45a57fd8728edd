import { consoleAssets, type ConsoleAssets } from '../../console/bundle.ts';
import { consoleHtml, CONSOLE_PAGE_HEADERS } from '../../console/page.ts';
import type { KoaContext, OperationHandlers } from '../context.ts';
import { etagOf, IMMUTABLE, respondCacheable } from '../http-caching.ts';

/** The page and its ETag, made once per build of the assets. */
const pages = new WeakMap<ConsoleAssets, { html: string; etag: string }>();

/** Handlers of the `console` tag: the web console's page and its two assets. */
export function consoleHandlers(): OperationHandlers {
  return {
    async getConsole(_operation, ctx) {
      const assets = await consoleAssets();
      let page = pages.get(assets);
      if (!page) {
        const html = consoleHtml(assets);
        page = { html, etag: etagOf(html) };
        pages.set(assets, page);
      }
      ctx.set(CONSOLE_PAGE_HEADERS);
      // Revalidated on every load: the page names the current assets.
      respondCacheable(ctx, { type: 'text/html; charset=utf-8', body: page.html, etag: page.etag, cacheControl: 'no-cache' });
    },
    async getConsoleScript(operation, ctx) {
      const assets = await consoleAssets();
      serveAsset(ctx, 'text/javascript; charset=utf-8', assets.script, assets.scriptHash, operation.request.query?.v);
    },
    async getConsoleStyles(operation, ctx) {
      const assets = await consoleAssets();
      serveAsset(ctx, 'text/css; charset=utf-8', assets.styles, assets.stylesHash, operation.request.query?.v);
    },
  };
}

/** A built asset: kept for a year when asked for by its content hash (the page's link), else revalidated on every load. */
function serveAsset(ctx: KoaContext, type: string, body: Buffer, hash: string, version: string | string[] | undefined): void {
  ctx.set('X-Content-Type-Options', 'nosniff');
  respondCacheable(ctx, { type, body, etag: `"${hash}"`, cacheControl: version === hash ? IMMUTABLE : 'no-cache' });
}
