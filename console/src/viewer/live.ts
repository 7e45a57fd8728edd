import { api } from '../api.ts';
import type { Schemas } from '../api.ts';

/**
 * Follows a conversation over Server-Sent Events. An EventSource cannot send the access token, so
 * each connection uses a single-use stream ticket; after any disconnection a new ticket is fetched
 * and the stream resumes after the last sequence number seen (`after_seq`), so nothing is missed
 * or shown twice.
 */
export interface LiveHandlers {
  event(stored: Schemas['StoredEvent']): void;
  delta(delta: { content?: string | null; reasoning_content?: string | null }): void;
  status(status: { execution_status: string | null; last_seq: number }): void;
  connection(state: 'connecting' | 'live' | 'reconnecting' | 'stopped', detail?: string): void;
}

export function follow(conversationId: string, afterSeq: () => number, handlers: LiveHandlers): () => void {
  let source: EventSource | undefined;
  let timer: number | undefined;
  let stopped = false;
  let failures = 0;

  async function connect(): Promise<void> {
    if (stopped) return;
    handlers.connection(failures ? 'reconnecting' : 'connecting');
    const { data, response } = await api
      .POST('/api/v1/conversations/{conversation_id}/events/stream-tickets', { params: { path: { conversation_id: conversationId } } })
      .catch(() => ({ data: undefined, response: undefined }));
    if (stopped) return;
    if (!data) {
      if (response && (response.status === 401 || response.status === 403 || response.status === 404)) return handlers.connection('stopped', 'Live updates are not available for this conversation.');
      return retry();
    }
    const url = `/api/v1/conversations/${encodeURIComponent(conversationId)}/events/stream?ticket=${encodeURIComponent(data.ticket)}&after_seq=${afterSeq()}`;
    source = new EventSource(url);
    source.onopen = () => {
      failures = 0;
      handlers.connection('live');
    };
    source.addEventListener('event', (message) => handlers.event(JSON.parse((message as MessageEvent<string>).data)));
    source.addEventListener('delta', (message) => handlers.delta(JSON.parse((message as MessageEvent<string>).data)));
    source.addEventListener('status', (message) => handlers.status(JSON.parse((message as MessageEvent<string>).data)));
    // Both the server's `error` event (slow consumer, shutdown) and a dropped connection: a ticket is
    // single-use, so instead of EventSource's own retry, reconnect with a new one.
    source.addEventListener('error', () => {
      source?.close();
      retry();
    });
  }

  function retry(): void {
    if (stopped) return;
    failures++;
    handlers.connection('reconnecting');
    timer = window.setTimeout(() => void connect(), Math.min(10_000, 500 * 2 ** Math.min(failures, 5)));
  }

  void connect();
  return () => {
    stopped = true;
    source?.close();
    window.clearTimeout(timer);
  };
}
