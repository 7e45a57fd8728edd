import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { PoolStats } from '../db/pool-stats.ts';
import type { OutageObserver } from './outage-log.ts';

/** Label used for requests that matched no operation of the spec (404s, 405s). */
export const UNMATCHED_OPERATION = 'unmatched';

/**
 * The service's Prometheus metrics, in a registry of their own (one per app, so tests that build
 * several apps do not share counters). Names follow Prometheus conventions: `_total` counters,
 * `_seconds` histograms, base units.
 */
/** How many distinct unknown event kinds get a label of their own; later ones are counted as `other`. */
const MAX_UNKNOWN_KIND_LABELS = 100;

export class Metrics {
  readonly registry = new Registry();

  readonly httpRequests = new Counter({
    name: 'http_requests_total',
    help: 'HTTP requests answered, by operationId of the spec ("unmatched" when none), method and status.',
    labelNames: ['operation', 'method', 'status'] as const,
    registers: [this.registry],
  });

  readonly httpDuration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time from receiving a request until its response is ready to be sent, by operationId.',
    labelNames: ['operation'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  readonly validationErrors = new Counter({
    name: 'http_validation_errors_total',
    help: 'Problems reported in 422 responses, by operationId and error type (missing, extra_forbidden, json_invalid, ...).',
    labelNames: ['operation', 'type'] as const,
    registers: [this.registry],
  });

  readonly webhookBatches = new Counter({
    name: 'webhook_batches_total',
    help: 'Event batches accepted by the webhook; result="deduplicated" when every stored-kind event in it was a redelivery.',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  readonly webhookBatchesRefused = new Counter({
    name: 'webhook_batches_refused_total',
    help: 'Webhook batches refused (and kept in the refusal ledger), by status and reason (body_too_large, batch_too_large, or the first 422 error type).',
    labelNames: ['status', 'reason'] as const,
    registers: [this.registry],
  });

  readonly webhookEventsReceived = new Counter({
    name: 'webhook_events_received_total',
    help: 'Events in accepted webhook batches, by kind (StreamingDeltaEvent included; it is never stored).',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });

  readonly webhookEventsUnrecognized = new Counter({
    name: 'webhook_events_unrecognized_total',
    help: 'Events in accepted webhook batches that the contract does not know (accept-unknown policy), by kind; kinds past the first 100 seen are counted as "other".',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });

  /** The unknown kinds labelled so far: a runtime names them, so their number is bounded. */
  private readonly unknownKindLabels = new Set<string>();

  readonly webhookEventsStored = new Counter({
    name: 'webhook_events_stored_total',
    help: 'Events the webhook stored for the first time.',
    registers: [this.registry],
  });

  readonly webhookEventsDeduplicated = new Counter({
    name: 'webhook_events_deduplicated_total',
    help: 'Events acknowledged but not stored again because their (conversation_id, id) was already stored.',
    registers: [this.registry],
  });

  readonly spendCharged = new Counter({
    name: 'billing_spend_charged_usd_total',
    help: "US dollars charged to users' balances by the spend ledger (increases of the agent-server's reported LLM costs).",
    registers: [this.registry],
  });

  readonly balancesDepleted = new Counter({
    name: 'billing_balances_depleted_total',
    help: "Charges that took a user's balance (bought minus spent) from zero or above to below zero.",
    registers: [this.registry],
  });

  readonly outboundAttempts = new Counter({
    name: 'outbound_webhook_attempts_total',
    help: 'Outbound webhook delivery attempts, by message type and outcome (succeeded, retrying, failed, gone, refused).',
    labelNames: ['type', 'outcome'] as const,
    registers: [this.registry],
  });

  readonly outboundAttemptDuration = new Histogram({
    name: 'outbound_webhook_attempt_duration_seconds',
    help: 'Time of an outbound webhook attempt, from connecting to the last byte read.',
    labelNames: ['type'] as const,
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });

  private outboundPending: (() => Promise<number>) | undefined;

  readonly outboundQueueDepth = new Gauge({
    name: 'outbound_webhook_messages_pending',
    help: 'Outbound webhook messages not yet delivered nor failed (the queue depth), read at each scrape.',
    registers: [this.registry],
    collect: async () => {
      if (this.outboundPending) this.outboundQueueDepth.set(await this.outboundPending().catch(() => Number.NaN));
    },
  });

  private ingestPressure: { waiting(): number; loopBusy(): number } | undefined;
  private yieldPressure: { restFactor(): number } | undefined;

  readonly webhookBatchesWaiting = new Gauge({
    name: 'webhook_batches_waiting',
    help: 'Webhook batches in the ingest at once, on average over the moments without background work (the median of the last three seconds): delivery yields to a busy webhook more as it grows from 4 to 12.',
    registers: [this.registry],
    collect: () => {
      if (this.ingestPressure) this.webhookBatchesWaiting.set(this.ingestPressure.waiting());
    },
  });

  readonly eventLoopBusy = new Gauge({
    name: 'event_loop_busy_ratio',
    help: "The share of the moments without background work this process's event loop was busy (0 to 1; the median of the last three seconds): delivery yields to a busy webhook more as it grows from 0.7 to 0.9.",
    registers: [this.registry],
    collect: () => {
      if (this.ingestPressure) this.eventLoopBusy.set(this.ingestPressure.loopBusy());
    },
  });

  readonly backgroundRestFactor = new Gauge({
    name: 'background_work_rest_factor',
    help: "How much longer than each unit of its work delivery and search indexing rest now, yielding to the webhook of this or another instance (0: not at all; 19: a saturated webhook).",
    registers: [this.registry],
    collect: () => {
      if (this.yieldPressure) this.backgroundRestFactor.set(this.yieldPressure.restFactor());
    },
  });

  readonly databaseUnavailable = new Counter({
    name: 'database_unavailable_total',
    help: 'Operations that failed because the database was unreachable, by component (request path: requests answered 503; webhook queue; webhook fan-out).',
    labelNames: ['component'],
    registers: [this.registry],
  });

  readonly databaseOutages = new Counter({
    name: 'database_outages_total',
    help: 'Times a component found the database unreachable after it had been reachable (each logged once, with its end).',
    labelNames: ['component'],
    registers: [this.registry],
  });

  /** What the outage logs (src/observability/outage-log.ts) count. */
  readonly outageObserver: OutageObserver = {
    failure: (component) => this.databaseUnavailable.inc({ component }),
    outage: (component) => this.databaseOutages.inc({ component }),
  };

  /** Where the queue depth is read from at each scrape. */
  trackOutboundQueueDepth(pending: () => Promise<number>): void {
    this.outboundPending = pending;
  }

  /** Read at each scrape: this instance's webhook pressure (`ingest`), and what work behind the webhook yields to (`yielding`: every instance's). */
  trackIngestPressure(ingest: { waiting(): number; loopBusy(): number }, yielding: { restFactor(): number }): void {
    this.ingestPressure = ingest;
    this.yieldPressure = yielding;
  }

  /** One outbound webhook attempt. */
  recordOutboundAttempt(type: string, outcome: string, seconds: number): void {
    this.outboundAttempts.inc({ type, outcome });
    this.outboundAttemptDuration.observe({ type }, seconds);
  }

  constructor(pool?: () => PoolStats | undefined) {
    collectDefaultMetrics({ register: this.registry });
    if (pool) this.registerPoolGauges(pool);
  }

  /** Records one accepted webhook batch: the kinds received and what `ingest` says it stored. */
  recordWebhookBatch(
    kinds: readonly string[],
    result: { stored: number; droppedDeltas: number },
    unrecognized?: readonly ({ kind: boolean } | null)[],
  ): void {
    let deltas = 0;
    const byKind = new Map<string, number>();
    for (const kind of unrecognized ? this.unrecognizedLabels(kinds, unrecognized) : kinds) {
      byKind.set(kind, (byKind.get(kind) ?? 0) + 1);
      if (kind === 'StreamingDeltaEvent') deltas++;
    }
    for (const [kind, count] of byKind) this.webhookEventsReceived.inc({ kind }, count);
    const storable = kinds.length - deltas;
    const duplicates = Math.max(0, storable - result.stored);
    this.webhookEventsStored.inc(result.stored);
    this.webhookEventsDeduplicated.inc(duplicates);
    this.webhookBatches.inc({ result: storable > 0 && result.stored === 0 ? 'deduplicated' : 'stored' });
  }

  /** The kinds as metric labels, with the events the contract does not know counted by kind (an unknown kind's label bounded). */
  private unrecognizedLabels(kinds: readonly string[], unrecognized: readonly ({ kind: boolean } | null)[]): string[] {
    return kinds.map((kind, i) => {
      const verdict = unrecognized[i];
      if (!verdict) return kind;
      const label = verdict.kind ? this.unknownKindLabel(kind) : kind;
      this.webhookEventsUnrecognized.inc({ kind: label });
      return label;
    });
  }

  private unknownKindLabel(kind: string): string {
    if (this.unknownKindLabels.has(kind)) return kind;
    if (this.unknownKindLabels.size >= MAX_UNKNOWN_KIND_LABELS || !/^[A-Za-z][A-Za-z0-9_]{0,63}$/.test(kind)) return 'other';
    this.unknownKindLabels.add(kind);
    return kind;
  }

  /** Records one refused webhook batch. */
  recordWebhookRefusal(status: number, reason: string): void {
    this.webhookBatchesRefused.inc({ status: String(status), reason });
  }

  /** Records what one conversation info charged (micro-dollars), and whether it overdrew the balance. */
  recordSpend(chargedMicroUsd: bigint, depleted: boolean): void {
    this.spendCharged.inc(Number(chargedMicroUsd) / 1e6);
    if (depleted) this.balancesDepleted.inc();
  }

  /** The pool is read when Prometheus scrapes, so the gauges are never stale. */
  private registerPoolGauges(pool: () => PoolStats | undefined): void {
    const gauge = (name: string, help: string, read: (stats: PoolStats) => number) =>
      new Gauge({
        name,
        help,
        registers: [this.registry],
        collect() {
          const stats = pool();
          this.set(stats ? read(stats) : 0);
        },
      });
    gauge('db_pool_connections_in_use', 'Database connections checked out of the pool.', (s) => s.numUsed());
    gauge('db_pool_connections_idle', 'Open database connections waiting in the pool.', (s) => s.numFree());
    gauge('db_pool_acquires_pending', 'Requests waiting for a database connection (should stay near 0).', (s) => s.numPendingAcquires());
    gauge('db_pool_connections_pending_create', 'Database connections being opened.', (s) => s.numPendingCreates());
  }
}
