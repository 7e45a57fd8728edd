import { consoleAssets } from '../../console/bundle.ts';
import { CONSOLE_HTML, CONSOLE_PAGE_HEADERS } from '../../console/page.ts';
import type { KoaContext, OperationHandlers } from '../context.ts';

/** Handlers of the `console` tag: the web console's page and its two assets. */
export function consoleHandlers(): OperationHandlers {
  return {
    getConsole(_operation, ctx) {
      ctx.status = 200;
      ctx.type = 'text/html; charset=utf-8';
      ctx.set(CONSOLE_PAGE_HEADERS);
      ctx.body = CONSOLE_HTML;
    },
    async getConsoleScript(_operation, ctx) {
      serveAsset(ctx, 'text/javascript; charset=utf-8', (await consoleAssets()).script);
    },
    async getConsoleStyles(_operation, ctx) {
      serveAsset(ctx, 'text/css; charset=utf-8', (await consoleAssets()).styles);
    },
  };
}

/** A built asset of the console: revalidated on every load (a rebuild changes it under the same name). */
function serveAsset(ctx: KoaContext, type: string, body: Buffer): void {
  ctx.status = 200;
  ctx.type = type;
  ctx.set({ 'Cache-Control': 'no-cache', 'X-Content-Type-Options': 'nosniff' });
  ctx.body = body;
}
