import type { KoaContext } from './context.ts';
import { HttpError } from '../errors.ts';
import { readJsonBody, type JsonBody } from './json-body.ts';

/** The operation whose single-event batches may exceed `BODY_LIMIT_BYTES`. */
const WEBHOOK_OPERATION = 'ingestEvents';

/** A webhook batch of more than one event past `BODY_LIMIT_BYTES` (its own class: the ledger's reason). */
export class BatchTooLargeError extends HttpError {
  override name = 'BatchTooLargeError';
}

/**
 * The request-body bytes this instance reads at once (`REQUEST_BODY_BUDGET_BYTES`). A body is
 * counted from before its first byte is read (its `Content-Length`, or the most it may be) until its
 * response is done, so many large bodies at once get 503 instead of the process running out of memory.
 */
export class RequestBodyBudget {
  private inFlight = 0;

  constructor(private readonly budgetBytes: number) {}

  /** Bytes reserved now (for tests and metrics). */
  get reservedBytes(): number {
    return this.inFlight;
  }

  /** Reserves `bytes` until the response of `ctx` is done; 503 with Retry-After when they do not fit. */
  reserve(ctx: KoaContext, bytes: number): void {
    if (bytes === 0) return;
    if (this.inFlight + bytes > this.budgetBytes) {
      throw new HttpError(503, 'The server is reading too many request bodies at once; retry later', { 'Retry-After': '1' });
    }
    this.inFlight += bytes;
    ctx.res.once('close', () => {
      this.inFlight -= bytes;
    });
  }
}

/** The size limits of request bodies (`src/config.ts`). */
export interface BodyLimits {
  bodyLimitBytes: number;
  webhookSingleEventLimitBytes: number;
}

/**
 * Reads an operation's JSON body within its limit and the instance's budget. The webhook reads up to
 * the single-event limit, since how many events a body holds is known only once it is parsed; a
 * batch of more than one event past `BODY_LIMIT_BYTES` is then a 413.
 */
export async function readOperationBody(
  ctx: KoaContext,
  operationId: string | undefined,
  limits: BodyLimits,
  budget: RequestBodyBudget,
): Promise<JsonBody | undefined> {
  const webhook = operationId === WEBHOOK_OPERATION;
  const readLimit = webhook ? webhookReadLimit(limits) : limits.bodyLimitBytes;
  const announced = ctx.request.length;
  // An announced length past the limit is refused (413) without reading; no length: the most it may be.
  if (announced === undefined || announced <= readLimit) budget.reserve(ctx, announced ?? readLimit);
  const body = await readJsonBody(ctx, readLimit);
  if (webhook && body) {
    ctx.state.webhookEventCount = Array.isArray(body.value) ? body.value.length : null;
    checkWebhookBatchSize(body, limits);
  }
  return body;
}

/** The most the webhook reads: a single event's limit (a batch's when that is larger). */
export function webhookReadLimit(limits: BodyLimits): number {
  return Math.max(limits.webhookSingleEventLimitBytes, limits.bodyLimitBytes);
}

/** 413 for a webhook body past `BODY_LIMIT_BYTES` unless it holds exactly one event. */
export function checkWebhookBatchSize(body: JsonBody, limits: BodyLimits): void {
  if (body.raw.length <= limits.bodyLimitBytes || (Array.isArray(body.value) && body.value.length === 1)) return;
  throw new BatchTooLargeError(
    413,
    `A batch of more than one event may hold at most ${limits.bodyLimitBytes} bytes (a single event up to ${webhookReadLimit(limits)})`,
  );
}
