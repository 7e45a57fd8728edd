import { contentHashOf } from '../crypto/content-hash.ts';
import type { KoaContext } from './context.ts';

/** A year: what an asset named by its content hash may be kept for (it never changes under that name). */
export const IMMUTABLE = 'public, max-age=31536000, immutable';

/** A strong `ETag` for these bytes. */
export function etagOf(content: string | Buffer): string {
  return `"${contentHashOf(content)}"`;
}

/**
 * Answers 200 with `body`, or 304 without it when the request's `If-None-Match` names `etag`
 * (Koa's `ctx.fresh`: GET and HEAD only, the weak comparison of RFC 9110).
 */
export function respondCacheable(ctx: KoaContext, response: { type: string; body: string | Buffer; etag: string; cacheControl: string }): void {
  ctx.status = 200;
  ctx.set({ ETag: response.etag, 'Cache-Control': response.cacheControl });
  if (ctx.fresh) {
    ctx.status = 304;
    return;
  }
  ctx.type = response.type;
  ctx.body = response.body;
}
