/**
 * A model, in TypeScript, of the OpenHands agent-server's `WebhookSubscriber`
 * (openhands-agent-server/openhands/agent_server/conversation_service.py, `WebhookSpec` in config.py):
 * events queue per conversation; a flush posts batches of at most `eventBufferSize` events and
 * `maxBatchBytes` (an event larger than that goes alone) to `{base}/events/{conversation_id.hex}`,
 * each tried `numRetries + 1` times; a batch still failing is put back at the front of the queue and
 * the flush stops, so it is the first batch of the next flush; past `maxQueueSize` events or
 * `maxQueueBytes` the oldest events are dropped.
 */
export interface WebhookSubscriberSpec {
  eventBufferSize: number;
  maxBatchBytes: number;
  maxQueueSize: number;
  maxQueueBytes: number;
  numRetries: number;
}

/** The agent-server's defaults (`WebhookSpec`). */
export const AGENT_SERVER_DEFAULTS: WebhookSubscriberSpec = {
  eventBufferSize: 5,
  maxBatchBytes: 5 * 1024 * 1024,
  maxQueueSize: 1000,
  maxQueueBytes: 50 * 1024 * 1024,
  numRetries: 3,
};

/** Posts one batch; true on a 2xx answer. */
export type PostBatch = (conversationHex: string, events: Record<string, unknown>[]) => Promise<number>;

export class WebhookSubscriber {
  readonly queue: Record<string, unknown>[] = [];
  private sizes: number[] = [];
  private queueBytes = 0;
  /** Events dropped by the queue's bounds, as the agent-server counts them. */
  dropped = 0;
  /** Every status answered, in order (the test reads what the server said). */
  readonly statuses: number[] = [];

  constructor(
    private readonly conversationId: string,
    private readonly post: PostBatch,
    private readonly spec: WebhookSubscriberSpec = AGENT_SERVER_DEFAULTS,
  ) {}

  /** Queues an event; a full buffer is posted at once (otherwise the agent-server's timer would flush it). */
  async publish(event: Record<string, unknown>): Promise<void> {
    const size = Buffer.byteLength(JSON.stringify(event));
    this.queue.push(event);
    this.sizes.push(size);
    this.queueBytes += size;
    this.trim();
    if (this.queue.length >= this.spec.eventBufferSize || this.queueBytes >= this.spec.maxBatchBytes) await this.flush();
  }

  /** `_post_events`: bounded batches, serially, until the queue is empty or a batch fails. */
  async flush(): Promise<void> {
    this.trim();
    let remaining = this.queue.length;
    while (remaining > 0) {
      const batch = this.takeBatch(remaining);
      if (!(await this.postWithRetries(batch.events))) {
        this.requeue(batch.events, batch.sizes);
        return;
      }
      remaining -= batch.events.length;
    }
  }

  private async postWithRetries(events: Record<string, unknown>[]): Promise<boolean> {
    const hex = this.conversationId.replace(/-/g, '');
    for (let attempt = 0; attempt <= this.spec.numRetries; attempt++) {
      const status = await this.post(hex, events);
      this.statuses.push(status);
      if (status >= 200 && status < 300) return true;
    }
    return false;
  }

  private takeBatch(maxEvents: number): { events: Record<string, unknown>[]; sizes: number[] } {
    let bytes = 2;
    let count = 0;
    for (const size of this.sizes) {
      const next = bytes + size + (count ? 1 : 0);
      if (count && next > this.spec.maxBatchBytes) break;
      bytes = next;
      count++;
      if (count >= Math.min(this.spec.eventBufferSize, maxEvents)) break;
    }
    const events = this.queue.splice(0, count);
    const sizes = this.sizes.splice(0, count);
    this.queueBytes -= sizes.reduce((a, b) => a + b, 0);
    return { events, sizes };
  }

  private requeue(events: Record<string, unknown>[], sizes: number[]): void {
    this.queue.unshift(...events);
    this.sizes.unshift(...sizes);
    this.queueBytes += sizes.reduce((a, b) => a + b, 0);
    this.trim();
  }

  /** `_trim_queue`: the oldest events go first. */
  private trim(): void {
    while (this.queue.length && (this.queue.length > this.spec.maxQueueSize || this.queueBytes > this.spec.maxQueueBytes)) {
      this.queue.shift();
      this.queueBytes -= this.sizes.shift()!;
      this.dropped++;
    }
  }
}
