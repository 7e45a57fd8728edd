/**
 * Server-Sent Events framing (https://html.spec.whatwg.org/multipage/server-sent-events.html).
 * Every `data` we send is one line of JSON text (JSON never needs a raw line break), so each event
 * is exactly one `data:` line.
 */
export function sseEvent(event: string, data: string, id?: number): string {
  return `${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${data}\n\n`;
}

/** A comment line: ignored by clients, keeps proxies from closing an idle connection. */
export const SSE_HEARTBEAT = ': heartbeat\n\n';

/** Tells EventSource how long to wait before reconnecting. */
export function sseRetry(ms: number): string {
  return `retry: ${ms}\n\n`;
}
