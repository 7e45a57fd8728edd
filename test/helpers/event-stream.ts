import http from 'node:http';

/** One Server-Sent Event as a client sees it. */
export interface SseMessage {
  event: string;
  data: string;
  id?: string;
}

/**
 * Incremental Server-Sent Events parser, after the WHATWG algorithm: lines end with CRLF, LF or
 * CR; `:` starts a comment; a blank line dispatches the event (default type `message`).
 */
export class SseParser {
  private pending = '';
  private data: string[] = [];
  private event = '';
  private id: string | undefined;
  readonly messages: SseMessage[] = [];
  /** `performance.now()` when each message was dispatched (same index as `messages`). */
  readonly arrivals: number[] = [];
  readonly comments: string[] = [];
  retry: number | undefined;

  private skipLineFeed = false;

  push(chunk: string): void {
    // A CRLF split across two chunks is one line end, not two.
    if (this.skipLineFeed && chunk.startsWith('\n')) chunk = chunk.slice(1);
    if (chunk === '') return;
    this.skipLineFeed = chunk.endsWith('\r');
    this.pending += chunk;
    const lines = this.pending.split(/\r\n|\r|\n/);
    // A trailing CR might be the first half of a CRLF: keep the unfinished line (and a lone CR).
    this.pending = lines.pop()!;
    for (const line of lines) this.line(line);
  }

  private line(line: string): void {
    if (line === '') {
      if (this.data.length > 0) {
        this.messages.push({ event: this.event || 'message', data: this.data.join('\n'), ...(this.id === undefined ? {} : { id: this.id }) });
        this.arrivals.push(performance.now());
      }
      this.data = [];
      this.event = '';
      this.id = undefined;
      return;
    }
    if (line.startsWith(':')) {
      this.comments.push(line.slice(1).trim());
      return;
    }
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.event = value;
    else if (field === 'id') this.id = value;
    else if (field === 'retry' && /^\d+$/.test(value)) this.retry = Number(value);
  }
}

/** An open event stream (or the refusal of one), read with Node's http client so it can be paused. */
export interface EventStream {
  status: number;
  headers: http.IncomingHttpHeaders;
  parser: SseParser;
  /** The body of a refusal (parsed JSON), or undefined for a stream. */
  refusal?: unknown;
  /** Resolves when the server ends the stream or the connection breaks. */
  ended: Promise<void>;
  response: http.IncomingMessage;
  /** Stops reading: the socket's buffers fill up and the server sees a stalled client. */
  pause(): void;
  resume(): void;
  /** Closes the connection from the client side. */
  close(): void;
  /** Waits until `condition` holds on the messages so far; false on timeout. */
  until(condition: (messages: SseMessage[]) => boolean, timeoutMs?: number): Promise<boolean>;
}

/** Opens `url` as an event stream with the given request headers. */
export function openEventStream(url: string, headers: Record<string, string> = {}): Promise<EventStream> {
  return new Promise((resolve, reject) => {
    const request = http.get(url, { headers: { Accept: 'text/event-stream', ...headers } }, (response) => {
      const parser = new SseParser();
      let body = '';
      let endedResolve!: () => void;
      const ended = new Promise<void>((r) => (endedResolve = r));
      const stream: EventStream = {
        status: response.statusCode ?? 0,
        headers: response.headers,
        parser,
        ended,
        response,
        pause: () => response.pause(),
        resume: () => response.resume(),
        close: () => request.destroy(),
        async until(condition, timeoutMs = 10_000) {
          const deadline = Date.now() + timeoutMs;
          while (!condition(parser.messages)) {
            if (Date.now() > deadline) return false;
            await new Promise((r) => setTimeout(r, 20));
          }
          return true;
        },
      };
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        if (stream.status === 200) parser.push(chunk);
        else body += chunk;
      });
      response.on('end', () => {
        if (stream.status !== 200) stream.refusal = body ? JSON.parse(body) : undefined;
        endedResolve();
      });
      response.on('error', () => endedResolve());
      response.on('close', () => endedResolve());
      if (stream.status === 200) resolve(stream);
      else void ended.then(() => resolve(stream));
    });
    request.on('error', reject);
  });
}
