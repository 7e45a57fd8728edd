import { consoleAssets } from '../../console/bundle.ts';
import { CONSOLE_HTML, CONSOLE_PAGE_HEADERS } from '../../console/page.ts';
import type { OperationHandlers } from '../context.ts';

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
      const { script } = await consoleAssets();
      ctx.status = 200;
      ctx.type = 'text/javascript; charset=utf-8';
      ctx.set({ 'Cache-Control': 'no-cache', 'X-Content-Type-Options': 'nosniff' });
      ctx.body = script;
    },
    async getConsoleStyles(_operation, ctx) {
      const { styles } = await consoleAssets();
      ctx.status = 200;
      ctx.type = 'text/css; charset=utf-8';
      ctx.set({ 'Cache-Control': 'no-cache', 'X-Content-Type-Options': 'nosniff' });
      ctx.body = styles;
    },
  };
}
