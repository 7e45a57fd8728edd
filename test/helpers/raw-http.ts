import net from 'node:net';

/** What a raw client saw: the answer as parsed, how much of its body it wrote, how the connection ended. */
export interface RawExchange {
  status: number | undefined;
  headers: Record<string, string>;
  /** The answer's body, complete when `Content-Length` bytes of it arrived. */
  body: string;
  complete: boolean;
  bytesWritten: number;
  /** The error a write or read met (`EPIPE`, `ECONNRESET`), if any. */
  error: string | undefined;
}

export interface RawBodyPlan {
  /** Bytes of body to send after the header block; Infinity sends until the connection ends. */
  total: number;
  chunkBytes: number;
  /** `chunked` frames each chunk with Transfer-Encoding: chunked (the header must say so). */
  chunked?: boolean;
  /** A pause between chunks, so that the body arrives well after the server could answer. */
  pauseMs?: number;
}

/**
 * A client that keeps writing its request body whatever the server answers meanwhile, as a client
 * writing a large upload does, and reads the answer as it comes: the raw socket shows whether the
 * answer arrived whole and whether the server reset the connection under the client's writes.
 */
export function sendWhileReading(port: number, head: string, plan: RawBodyPlan): Promise<RawExchange> {
  return new Promise((resolve) => {
    // Half-open: like an upload client, it goes on writing after the server has said all it had to say.
    const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    const received: Buffer[] = [];
    let bytesWritten = 0;
    let error: string | undefined;
    const chunk = Buffer.alloc(plan.chunkBytes, 0x20);
    socket.on('data', (data) => received.push(data));
    socket.on('error', (e: NodeJS.ErrnoException) => (error ??= e.code ?? e.message));
    socket.on('close', () => resolve({ ...parseAnswer(Buffer.concat(received)), bytesWritten, error }));
    const writeNext = () => {
      if (socket.destroyed || !socket.writable) return;
      if (bytesWritten >= plan.total) {
        socket.end(plan.chunked ? '0\r\n\r\n' : '');
        return;
      }
      const piece = chunk.subarray(0, Math.min(plan.chunkBytes, plan.total - bytesWritten));
      bytesWritten += piece.length;
      const framed = plan.chunked ? Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')]) : piece;
      const next = () => (plan.pauseMs ? setTimeout(writeNext, plan.pauseMs) : setImmediate(writeNext));
      if (socket.write(framed)) next();
      else socket.once('drain', next);
    };
    socket.once('connect', () => {
      socket.write(head);
      writeNext();
    });
  });
}

function parseAnswer(all: Buffer): Pick<RawExchange, 'status' | 'headers' | 'body' | 'complete'> {
  const end = all.indexOf('\r\n\r\n');
  if (end < 0) return { status: undefined, headers: {}, body: '', complete: false };
  const [statusLine, ...lines] = all.subarray(0, end).toString('latin1').split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const length = Number(headers['content-length']);
  const body = Number.isFinite(length) ? all.subarray(end + 4, end + 4 + length) : all.subarray(end + 4);
  return {
    status: Number(statusLine!.split(' ')[1]),
    headers,
    body: body.toString('utf8'),
    complete: Number.isFinite(length) && body.length === length,
  };
}
