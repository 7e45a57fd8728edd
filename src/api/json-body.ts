import type { Context } from 'koa';
import getRawBody from 'raw-body';
import { HttpError } from './http-errors.ts';
import { RequestValidationError, jsonInvalid } from './validation-errors.ts';

function isJson(contentType: string | undefined): boolean {
  if (!contentType) return false;
  const type = contentType.split(';')[0]!.trim().toLowerCase();
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));
}

/** Where JSON.parse stopped, as a character offset, when its message says. */
function errorPosition(message: string): number | undefined {
  const match = /position (\d+)/.exec(message);
  return match ? Number(match[1]) : undefined;
}

/**
 * Reads and parses a JSON request body: 415 for another media type, 413 past `limitBytes`,
 * 422 `json_invalid` for malformed JSON. An absent body is `undefined` (the schema decides whether
 * that is allowed).
 */
export async function readJsonBody(ctx: Context, limitBytes: number): Promise<unknown> {
  const length = ctx.request.length;
  const chunked = ctx.get('transfer-encoding') !== '';
  if (!chunked && !length) return undefined;
  if (!isJson(ctx.get('content-type'))) {
    throw new HttpError(415, 'Content-Type must be application/json');
  }
  if (length !== undefined && length > limitBytes) {
    throw new HttpError(413, `Request body exceeds the limit of ${limitBytes} bytes`);
  }
  let text: string;
  try {
    text = await getRawBody(ctx.req, { length, limit: limitBytes, encoding: 'utf8' });
  } catch (error) {
    const { type, status } = error as { type?: string; status?: number };
    if (type === 'entity.too.large') throw new HttpError(413, `Request body exceeds the limit of ${limitBytes} bytes`);
    if (type === 'encoding.unsupported') throw new HttpError(415, 'Only UTF-8 JSON bodies are accepted');
    throw new HttpError(status ?? 400, 'The request body could not be read');
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    const message = (error as Error).message;
    throw new RequestValidationError([jsonInvalid(message, errorPosition(message))]);
  }
}
