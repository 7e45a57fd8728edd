import pg from 'pg';
import type { Logger } from '../logger.ts';
import { parseJson, stringifyJson } from '../lossless-json.ts';

/** The channel the triggers and `ingest_event_batches` publish on (src/db/functions). */
export const ACTIVITY_CHANNEL = 'conversation_activity';

/** `application_name` of the listening connection (visible in `pg_stat_activity`). */
export const LISTENER_APPLICATION_NAME = 'live-activity-listener';

/** One notification of `conversation_activity`, as published by the triggers and `ingest_event_batches`. */
export type Activity =
  | { type: 'events'; conversation_id: string; first_seq: number; last_seq: number }
  | { type: 'status'; conversation_id: string; execution_status: string | null; last_seq: number }
  | { type: 'delta'; conversation_id: string; batch: string; n: number; eventJson: string };

export interface ActivityHandler {
  /** A notification arrived. */
  onActivity(activity: Activity): void;
  /** The connection was lost and is listening again: notifications in between are lost. */
  onReconnected(): void;
}

const MIN_BACKOFF_MS = 100;
const MAX_BACKOFF_MS = 5_000;

/**
 * The one dedicated LISTEN connection of this server instance (not a pool connection: a LISTEN
 * lives as long as its session). Connected on first use; when the connection is lost it reconnects
 * with exponential backoff and then tells the handler, whose subscribers catch up from the last
 * sequence number they sent (notifications sent in between are gone).
 */
export class ActivityListener {
  private client: pg.Client | undefined;
  private ready: Promise<void> | undefined;
  private closed = false;
  private backoffMs = MIN_BACKOFF_MS;
  private reconnectTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly connectionString: string,
    private readonly handler: ActivityHandler,
    private readonly log: Logger,
  ) {}

  /** Resolves once this instance is listening (connecting first if needed). */
  listening(): Promise<void> {
    if (this.closed) return Promise.reject(new Error('the activity listener is closed'));
    this.ready ??= this.connect(false);
    return this.ready;
  }

  private async connect(isReconnect: boolean): Promise<void> {
    const client = new pg.Client({ connectionString: this.connectionString, application_name: LISTENER_APPLICATION_NAME });
    client.on('notification', (message) => {
      if (message.channel !== ACTIVITY_CHANNEL || !message.payload) return;
      const activity = parseActivity(message.payload);
      if (activity) this.handler.onActivity(activity);
    });
    client.on('error', (error) => this.lost(client, error));
    client.on('end', () => this.lost(client, undefined));
    try {
      await client.connect();
      await client.query(`listen ${ACTIVITY_CHANNEL}`);
    } catch (error) {
      client.removeAllListeners('end');
      client.on('error', () => {});
      void client.end().catch(() => {});
      if (!isReconnect) {
        this.ready = undefined; // the next subscriber tries again
        throw error;
      }
      this.scheduleReconnect(error);
      return;
    }
    if (this.closed) {
      await client.end().catch(() => {});
      return;
    }
    this.client = client;
    this.backoffMs = MIN_BACKOFF_MS;
    if (isReconnect) {
      this.log.info('live activity listener reconnected');
      this.handler.onReconnected();
    }
  }

  private lost(client: pg.Client, error: Error | undefined): void {
    if (this.client !== client) return;
    this.client = undefined;
    client.removeAllListeners('end');
    client.on('error', () => {});
    void client.end().catch(() => {});
    if (this.closed) return;
    this.scheduleReconnect(error);
  }

  private scheduleReconnect(error: unknown): void {
    if (this.closed || this.reconnectTimer) return;
    const delay = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, MAX_BACKOFF_MS);
    this.log.warn({ err: error, retryInMs: delay }, 'live activity listener lost its connection; reconnecting');
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      this.ready = this.connect(true);
    }, delay);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    const client = this.client;
    this.client = undefined;
    if (client) {
      client.removeAllListeners('end');
      client.on('error', () => {});
      await client.end().catch(() => {});
    }
  }
}

/** The notification as an `Activity`, or undefined for anything this version does not know. */
function parseActivity(payload: string): Activity | undefined {
  try {
    // Lossless: a delta's numbers go out exactly as they came in.
    const activity = parseJson(payload) as Record<string, unknown>;
    if (typeof activity.conversation_id !== 'string') return undefined;
    if (activity.type === 'events' && typeof activity.last_seq === 'number') return activity as Activity;
    if (activity.type === 'status') return activity as Activity;
    if (activity.type === 'delta') {
      return {
        type: 'delta',
        conversation_id: activity.conversation_id,
        batch: String(activity.batch),
        n: Number(activity.n),
        eventJson: stringifyJson(activity.event),
      };
    }
    return undefined;
  } catch {
    return undefined;
  }
}
