import type { components, operations } from '../../../generated/openapi.ts';
import { consoleAssets } from '../../console/bundle.ts';
import type { EventFilterInput } from '../../conversations/search.ts';
import type { ShareService } from '../../sharing/share-service.ts';
import { SHARE_GONE_HTML, SHARE_HTML, SHARE_PAGE_HEADERS } from '../../sharing/share-page.ts';
import { principalOf, respond, respondWithJsonText, type KoaContext, type OperationHandlers } from '../context.ts';
import { respondCacheable } from '../http-caching.ts';

type ConversationPath = operations['listShareLinks']['parameters']['path'];
type LinkPath = operations['revokeShareLink']['parameters']['path'];
type TokenPath = operations['getSharedConversation']['parameters']['path'];
type SharedEventsQuery = NonNullable<operations['listSharedEvents']['parameters']['query']>;
type ShareLinkCreate = components['schemas']['ShareLinkCreate'];

const list = <T>(value: T[] | T | undefined): T[] | undefined => (value === undefined ? undefined : Array.isArray(value) ? value : [value]);

function eventFilterOf(query: SharedEventsQuery): EventFilterInput {
  return { afterSeq: query.after_seq, beforeSeq: query.before_seq, kinds: list(query.kind), sources: list(query.source), since: query.since, until: query.until };
}

function sendPage(ctx: KoaContext, status: number, html: string): void {
  ctx.status = status;
  ctx.set(SHARE_PAGE_HEADERS);
  ctx.type = 'text/html; charset=utf-8';
  ctx.body = html;
}

/** Handlers of the `sharing` tag: the owner's share links, and what a link shows to anyone holding it. */
export function sharingHandlers(shares: ShareService): OperationHandlers {
  return {
    async createShareLink(operation, ctx) {
      const { conversation_id } = operation.request.params as ConversationPath;
      const body = (operation.request.requestBody ?? {}) as ShareLinkCreate;
      respond(ctx, 201, await shares.create(principalOf(operation), conversation_id, body));
    },
    async listShareLinks(operation, ctx) {
      const { conversation_id } = operation.request.params as ConversationPath;
      respond<components['schemas']['ShareLinkList']>(ctx, 200, { items: await shares.list(principalOf(operation), conversation_id) });
    },
    async revokeShareLink(operation, ctx) {
      const { conversation_id, share_link_id } = operation.request.params as LinkPath;
      respond(ctx, 200, await shares.revoke(principalOf(operation), conversation_id, share_link_id));
    },
    async getSharedConversation(operation, ctx) {
      const { token } = operation.request.params as TokenPath;
      ctx.set({ 'Cache-Control': 'no-store', 'X-Robots-Tag': 'noindex' });
      respond(ctx, 200, await shares.sharedConversation(token));
    },
    async listSharedEvents(operation, ctx) {
      const { token } = operation.request.params as TokenPath;
      const query = (operation.request.query ?? {}) as SharedEventsQuery;
      const page = await shares.sharedEvents(token, { filter: eventFilterOf(query), order: query.order ?? 'asc', limit: query.limit ?? 100, cursor: query.cursor });
      ctx.set({ 'Cache-Control': 'no-store', 'X-Robots-Tag': 'noindex' });
      respondWithJsonText(ctx, 200, page);
    },
    async getSharePage(operation, ctx) {
      const { token } = operation.request.params as TokenPath;
      if (await shares.opens(token)) sendPage(ctx, 200, SHARE_HTML);
      else sendPage(ctx, 404, SHARE_GONE_HTML);
    },
    async getShareScript(_operation, ctx) {
      const assets = await consoleAssets();
      ctx.set('X-Content-Type-Options', 'nosniff');
      // Revalidated on every load (the page's link carries no version): a 304 when unchanged.
      respondCacheable(ctx, { type: 'text/javascript; charset=utf-8', body: assets.shareScript, etag: `"${assets.shareScriptHash}"`, cacheControl: 'no-cache' });
    },
  };
}
