import type { Context } from 'koa';
import getRawBody from 'raw-body';
import { JsonSyntaxError, parseJson } from '../lossless-json.ts';
import { HttpError } from '../errors.ts';
import { RequestValidationError, jsonInvalid } from './validation-errors.ts';

function isJson(contentType: string | undefined): boolean {
  if (!contentType) return false;
  const type = contentType.split(';')[0]!.trim().toLowerCase();
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));
}

/** Decodes strictly: invalid UTF-8 is refused, not silently replaced by U+FFFD. */
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/**
 * A request body as received (the exact bytes, for signature checks), as JSON text (decoded, a
 * leading byte order mark dropped: what to store) and as parsed.
 */
export interface JsonBody {
  raw: Buffer;
  text: string;
  value: unknown;
}

/**
 * The one reader of every operation's JSON body (a UTF-8 byte order mark is dropped by the decoder,
 * the same for all). Reads and parses it: 415 for another media type, 413 past `limitBytes`,
 * 422 `json_invalid` for invalid UTF-8, malformed JSON or nesting deeper than `MAX_JSON_DEPTH`.
 * Numbers a double would round are kept exactly (`src/lossless-json.ts`). An absent body is `undefined` (the schema
 * decides whether that is allowed).
 */
export async function readJsonBody(ctx: Context, limitBytes: number): Promise<JsonBody | undefined> {
  const length = ctx.request.length;
  const chunked = ctx.get('transfer-encoding') !== '';
  if (!chunked && !length) return undefined;
  if (!isJson(ctx.get('content-type'))) {
    throw new HttpError(415, 'Content-Type must be application/json');
  }
  if (length !== undefined && length > limitBytes) {
    throw new HttpError(413, `Request body exceeds the limit of ${limitBytes} bytes`);
  }
  let raw: Buffer;
  try {
    raw = await getRawBody(ctx.req, { length, limit: limitBytes });
  } catch (error) {
    const { type, status } = error as { type?: string; status?: number };
    if (type === 'entity.too.large') throw new HttpError(413, `Request body exceeds the limit of ${limitBytes} bytes`);
    throw new HttpError(status ?? 400, 'The request body could not be read');
  }
  // Kept even when it is not valid JSON: the refusal ledger keeps what a refused webhook batch held.
  ctx.state.rawBody = raw;
  return decodeJsonBody(raw);
}

/** A body already read, decoded and parsed as `readJsonBody` does (422 `json_invalid` when it is not JSON). */
export function decodeJsonBody(raw: Buffer): JsonBody {
  let text: string;
  try {
    text = utf8.decode(raw);
  } catch {
    throw new RequestValidationError([jsonInvalid('Invalid UTF-8 in the request body', undefined)]);
  }
  try {
    return { raw, text, value: parseJson(text) };
  } catch (error) {
    if (!(error instanceof JsonSyntaxError)) throw error;
    throw new RequestValidationError([jsonInvalid(error.message, error.position)]);
  }
}
