import type { ServerResponse } from 'node:http';
import type { ConversationService } from '../conversations/conversation-service.ts';
import { TooManyRequestsError, UnavailableError } from '../errors.ts';
import type { Principal } from '../identity/authenticator.ts';
import type { Logger } from '../logger.ts';
import { parseJson, stringifyJson } from '../lossless-json.ts';
import { ActivityListener, type Activity, type ActivityHandler } from './activity-listener.ts';
import { SSE_HEARTBEAT, sseEvent, sseRetry } from './sse.ts';

export interface LiveStreamOptions {
  /**
   * Bytes a subscriber may have waiting in its socket; stored events are read no faster than it
   * drains. Deltas and status changes wait in its queue, up to as many bytes again.
   */
  readonly bufferBytes: number;
  /** A subscriber whose full buffer does not drain for this long is dropped. */
  readonly stallMs: number;
  readonly heartbeatMs: number;
  readonly maxPerUser: number;
  /** How often the credentials of open streams are checked again; a revoked one's streams end. */
  readonly credentialCheckMs: number;
}

/** A stream's caller: the credential it was opened with and the organization it acts in. */
export interface StreamCaller {
  readonly credentialId: string;
  readonly orgId: string;
}

/**
 * Of the given callers, those still good (credential not revoked or expired, user not suspended, organization
 * not suspended and still theirs), as `callerKey`s.
 */
export type CredentialCheck = (callers: readonly StreamCaller[]) => Promise<Set<string>>;

/** How `CredentialCheck` names a caller. */
export function callerKey(caller: StreamCaller): string {
  return `${caller.credentialId}/${caller.orgId}`;
}

/** Why a stream ended from our side; sent as the `reason` of the final `error` event. */
export type CloseReason = 'slow_consumer' | 'server_shutdown' | 'read_failed' | 'credential_revoked';

const CLOSE_DETAIL: Record<CloseReason, string> = {
  slow_consumer: 'The client did not read the stream fast enough; reconnect with Last-Event-ID to resume.',
  server_shutdown: 'The server is shutting down; reconnect with Last-Event-ID to resume.',
  read_failed: 'The stored events could not be read; reconnect with Last-Event-ID to resume.',
  credential_revoked: 'The credential of this stream was revoked or expired, or its account suspended.',
};

/** Stored events read per query while catching up. */
const PAGE_SIZE = 100;
/** How long a dropped subscriber's socket may take to take its final bytes before it is destroyed. */
const DROP_GRACE_MS = 5_000;
/** EventSource's reconnection delay we ask for. */
const RETRY_MS = 1_000;

/** A unit of work of one subscriber, done in order. */
type Task =
  /** Send the stored events after the last one sent, up to `upTo` (Infinity: all there are). */
  | { kind: 'events'; upTo: number }
  /** Send this ready-made SSE text (a delta or a status change). */
  | { kind: 'text'; text: string }
  /** Send the conversation's current status (after notifications may have been lost). */
  | { kind: 'status' };

/**
 * Live conversation streams of this server instance: one LISTEN connection (`ActivityListener`)
 * and the subscribers it fans out to, by conversation id. Ingestion never waits for any of this:
 * notifications arrive on their own connection and each subscriber works through its own queue.
 */
export class LiveStreams implements ActivityHandler {
  private readonly byConversation = new Map<string, Set<Subscriber>>();
  private readonly countByUser = new Map<string, number>();
  private readonly listener: ActivityListener;
  private closed = false;
  private credentialTimer: NodeJS.Timeout | undefined;

  constructor(
    connectionString: string,
    readonly conversations: ConversationService,
    readonly options: LiveStreamOptions,
    readonly log: Logger,
    private readonly credentialCheck?: CredentialCheck,
  ) {
    this.listener = new ActivityListener(connectionString, this, log);
  }

  /**
   * Streams `conversationId` to `res` for `principal` (who must own it: checked here, before any
   * byte is sent), starting after sequence number `afterSeq`. Throws before the response starts
   * (403/404/429/503); afterwards the stream ends with the client or with a final `error` event.
   */
  async subscribe(principal: Principal, conversationId: string, afterSeq: number, res: ServerResponse): Promise<void> {
    if (this.closed) throw new UnavailableError('The server is shutting down; retry on another instance');
    const conversation = await this.conversations.getConversation(principal, conversationId);
    // HEAD (routed as GET): the stream's status and headers once the caller may follow it, no stream.
    if (res.req.method === 'HEAD') {
      const { Connection: _, ...headers } = STREAM_HEADERS;
      res.writeHead(200, headers).end();
      return;
    }
    // Listening before reading history: whatever commits from now on is announced to us.
    await this.listener.listening();
    // From the count to the registration nothing awaits, so concurrent requests cannot overshoot.
    const count = this.countByUser.get(principal.userId) ?? 0;
    if (count >= this.options.maxPerUser) {
      throw new TooManyRequestsError(`At most ${this.options.maxPerUser} live streams per user may be open at once`);
    }
    if (this.closed) throw new UnavailableError('The server is shutting down; retry on another instance');

    const subscriber = new Subscriber(this, principal, conversation.id, afterSeq, res);
    this.countByUser.set(principal.userId, (this.countByUser.get(principal.userId) ?? 0) + 1);
    let subscribers = this.byConversation.get(conversation.id);
    if (!subscribers) this.byConversation.set(conversation.id, (subscribers = new Set()));
    subscribers.add(subscriber);
    subscriber.start();
    this.checkCredentialsPeriodically();
  }

  /** While streams are open, ends those whose credential stopped being good (one query per interval). */
  private checkCredentialsPeriodically(): void {
    if (!this.credentialCheck || this.credentialTimer) return;
    const check = this.credentialCheck;
    const tick = async () => {
      const open = [...this.byConversation.values()].flatMap((subscribers) => [...subscribers]);
      if (open.length === 0 || this.closed) {
        this.credentialTimer = undefined;
        return;
      }
      try {
        const callers = new Map(open.map((s) => [callerKey(s.principal), s.principal]));
        const valid = await check([...callers.values()]);
        for (const subscriber of open) {
          if (!valid.has(callerKey(subscriber.principal))) void subscriber.end('credential_revoked');
        }
      } catch (error) {
        // The database is unreachable: the streams stay; the next tick checks again.
        this.log.warn({ err: error }, 'live streams could not check their credentials');
      }
      if (!this.closed) this.credentialTimer = setTimeout(() => void tick(), this.options.credentialCheckMs).unref();
    };
    this.credentialTimer = setTimeout(() => void tick(), this.options.credentialCheckMs).unref();
  }

  /** Called by a subscriber when it has ended, whichever way. */
  removed(subscriber: Subscriber): void {
    const subscribers = this.byConversation.get(subscriber.conversationId);
    if (subscribers?.delete(subscriber)) {
      if (subscribers.size === 0) this.byConversation.delete(subscriber.conversationId);
      const count = (this.countByUser.get(subscriber.principal.userId) ?? 1) - 1;
      if (count > 0) this.countByUser.set(subscriber.principal.userId, count);
      else this.countByUser.delete(subscriber.principal.userId);
    }
  }

  onActivity(activity: Activity): void {
    const subscribers = this.byConversation.get(activity.conversation_id);
    if (!subscribers) return;
    for (const subscriber of subscribers) subscriber.notify(activity);
  }

  onReconnected(): void {
    // Notifications were lost while disconnected: every subscriber reads what it missed.
    for (const subscribers of this.byConversation.values()) {
      for (const subscriber of subscribers) subscriber.resync();
    }
  }

  /** Open live streams on this instance. */
  get size(): number {
    let size = 0;
    for (const subscribers of this.byConversation.values()) size += subscribers.size;
    return size;
  }

  /** Ends every stream (final `error` event, reason `server_shutdown`) and stops listening. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.credentialTimer);
    const closing: Promise<void>[] = [];
    for (const subscribers of [...this.byConversation.values()]) {
      for (const subscriber of [...subscribers]) closing.push(subscriber.end('server_shutdown'));
    }
    // Each response is done (its socket idle or closed) within a second: see `Subscriber.end`.
    await Promise.all([...closing, this.listener.close()]);
  }
}

const STREAM_HEADERS = {
  'Content-Type': 'text/event-stream; charset=utf-8',
  'Cache-Control': 'no-store, no-transform',
  Connection: 'keep-alive',
  // nginx and similar proxies would otherwise buffer the stream.
  'X-Accel-Buffering': 'no',
};

function statusText(executionStatus: string | null, lastSeq: number): string {
  return sseEvent('status', JSON.stringify({ execution_status: executionStatus, last_seq: lastSeq }));
}

/** One client's stream: a queue of tasks done one at a time, so what it sends stays in order. */
class Subscriber {
  private readonly queue: Task[] = [];
  private queuedBytes = 0;
  private running = false;
  private ended = false;
  private heartbeat: NodeJS.Timeout | undefined;
  private finished = false;
  private endReason: CloseReason | undefined;
  private readonly startedAt = performance.now();
  /** Reads of everything stored (`upTo: Infinity`) queued or running. */
  private readingAll = 0;

  constructor(
    private readonly hub: LiveStreams,
    readonly principal: Principal,
    readonly conversationId: string,
    /** The sequence number of the last stored event sent (or that the client already had). */
    private lastSeq: number,
    private readonly res: ServerResponse,
  ) {}

  start(): void {
    const res = this.res;
    res.socket?.setTimeout(0);
    res.socket?.setNoDelay(true);
    res.writeHead(200, STREAM_HEADERS);
    res.on('close', () => this.finish());
    // The client may have gone while we checked and subscribed: then 'close' has been and gone.
    if (!res.socket || res.socket.destroyed) {
      this.finish();
      return;
    }
    this.heartbeat = setInterval(() => this.heartbeatTick(), this.hub.options.heartbeatMs);
    this.heartbeat.unref();
    res.write(sseRetry(RETRY_MS));
    // The status and the history, read now that notifications reach this subscriber (so no change
    // falls in between); live notifications queue up behind them.
    this.resync();
  }

  notify(activity: Activity): void {
    if (this.ended) return;
    if (activity.type === 'events') {
      if (activity.last_seq <= this.lastSeq) return;
      const last = this.queue[this.queue.length - 1];
      // Consecutive event ranges merge into one read.
      if (last?.kind === 'events') last.upTo = Math.max(last.upTo, activity.last_seq);
      else this.enqueue({ kind: 'events', upTo: activity.last_seq });
    } else if (activity.type === 'delta') {
      // While reading all of history, the events a delta precedes may be read with it: the delta
      // would come after its final message. Deltas are transient; history has that message.
      if (this.readingAll > 0) return;
      this.enqueue({ kind: 'text', text: sseEvent('delta', activity.eventJson) });
    } else {
      this.enqueue({ kind: 'text', text: statusText(activity.execution_status, activity.last_seq) });
    }
  }

  /** Sends the current status, then every stored event after the last one sent (at the start, and after lost notifications). */
  resync(): void {
    if (this.ended) return;
    this.enqueue({ kind: 'status' });
    this.readingAll++;
    this.enqueue({ kind: 'events', upTo: Infinity });
  }

  private enqueue(task: Task): void {
    this.queue.push(task);
    if (task.kind === 'text') {
      this.queuedBytes += task.text.length;
      // What we cannot pace (deltas, status changes) waits here, up to the buffer size.
      if (this.queuedBytes > this.hub.options.bufferBytes) {
        void this.end('slow_consumer');
        return;
      }
    }
    if (!this.running) void this.run();
  }

  private async run(): Promise<void> {
    this.running = true;
    try {
      while (!this.ended && this.queue.length > 0) {
        const task = this.queue[0]!;
        if (task.kind === 'text') {
          if (!(await this.room())) return;
          this.queue.shift();
          this.queuedBytes -= task.text.length;
          this.res.write(task.text);
        } else if (task.kind === 'status') {
          this.queue.shift();
          const conversation = await this.hub.conversations.getConversation(this.principal, this.conversationId);
          if (!(await this.room())) return;
          this.res.write(statusText(conversation.execution_status ?? null, conversation.event_count));
        } else {
          this.queue.shift();
          try {
            await this.sendEvents(task.upTo);
          } finally {
            if (task.upTo === Infinity) this.readingAll--;
          }
        }
      }
    } catch (error) {
      this.hub.log.warn({ err: error, conversationId: this.conversationId }, 'live stream could not read the conversation');
      void this.end('read_failed');
    } finally {
      this.running = false;
    }
  }

  /**
   * True when the socket has room: less than the buffer size waiting to be sent. Otherwise waits
   * for it to drain; a client that takes nothing for `stallMs` is dropped (false).
   */
  private async room(): Promise<boolean> {
    if (this.ended) return false;
    if (this.res.writableLength < this.hub.options.bufferBytes) return true;
    const res = this.res;
    const drained = await new Promise<boolean>((resolve) => {
      const done = (value: boolean) => {
        clearTimeout(timer);
        res.off('drain', onDrain);
        res.off('close', onClose);
        resolve(value);
      };
      const onDrain = () => done(true);
      const onClose = () => done(false);
      const timer = setTimeout(() => done(false), this.hub.options.stallMs);
      res.on('drain', onDrain);
      res.on('close', onClose);
    });
    if (!drained) void this.end('slow_consumer');
    return drained && !this.ended;
  }

  /**
   * Sends the stored events after `lastSeq` up to `upTo`, a page at a time, read through the same
   * path as `GET …/events` (so both show events alike), never one the client already has. Paced
   * by the socket: nothing more is read while the buffer is full.
   */
  private async sendEvents(upTo: number): Promise<void> {
    while (!this.ended && this.lastSeq < upTo) {
      if (!(await this.room())) return;
      const limit = Number.isFinite(upTo) ? Math.min(PAGE_SIZE, upTo - this.lastSeq) : PAGE_SIZE;
      const pageJson = await this.hub.conversations.listEvents(this.principal, this.conversationId, {
        filter: { afterSeq: this.lastSeq },
        order: 'asc',
        limit,
      });
      if (this.ended) return;
      const page = parseJson(pageJson.toString('utf8')) as { items: { seq: number }[]; next_after_seq: number | null };
      let text = '';
      for (const item of page.items) {
        if (item.seq <= this.lastSeq) continue;
        if (text && this.res.writableLength + text.length >= this.hub.options.bufferBytes) {
          this.res.write(text);
          text = '';
          if (!(await this.room())) return;
        }
        text += sseEvent('event', stringifyJson(item), item.seq);
        this.lastSeq = item.seq;
      }
      if (text) this.res.write(text);
      if (page.next_after_seq === null) return;
    }
  }

  /** A comment line when the connection is otherwise idle (nothing waiting to be sent). */
  private heartbeatTick(): void {
    if (this.ended || this.queue.length > 0 || this.res.writableLength > 0) return;
    this.res.write(SSE_HEARTBEAT);
  }

  /** Ends the stream from our side with a final `error` event saying why. */
  end(reason: CloseReason): Promise<void> {
    const closed = new Promise<void>((resolve) => (this.res.closed ? resolve() : this.res.once('close', () => resolve())));
    if (this.ended) return closed;
    this.endReason = reason;
    this.ended = true;
    this.queue.length = 0;
    this.queuedBytes = 0;
    const body = JSON.stringify({ reason, detail: CLOSE_DETAIL[reason], last_event_id: this.lastSeq });
    this.res.end(sseEvent('error', body));
    if (reason === 'slow_consumer') {
      this.hub.log.warn(
        { conversationId: this.conversationId, userId: this.principal.userId, lastSeq: this.lastSeq, buffered: this.res.writableLength },
        'live subscriber dropped: too slow',
      );
    }
    // A stalled client may never take the last bytes: its socket does not wait for it forever.
    const destroyTimer = setTimeout(() => this.res.destroy(), reason === 'slow_consumer' ? DROP_GRACE_MS : 1_000);
    destroyTimer.unref();
    this.res.once('close', () => clearTimeout(destroyTimer));
    this.finish();
    return closed;
  }

  /** Bookkeeping once the stream is over (ended by us or closed by the client). */
  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.ended = true;
    clearInterval(this.heartbeat);
    this.queue.length = 0;
    this.hub.removed(this);
    this.hub.log.info(
      {
        conversationId: this.conversationId,
        userId: this.principal.userId,
        lastSeq: this.lastSeq,
        endedBy: this.endReason ?? 'client',
        ms: Math.round(performance.now() - this.startedAt),
      },
      'live stream ended',
    );
  }
}
