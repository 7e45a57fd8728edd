import type { EntityManager } from '@mikro-orm/postgresql';
import type { OutboundWebhookConfig } from '../config.ts';
import type { Logger } from '../logger.ts';
import { isDatabaseUnavailable } from '../db/errors.ts';
import type { OutageLog } from '../observability/outage-log.ts';
import type { AttemptMaker } from './attempt.ts';
import { recordAttempts } from './attempt-record.ts';
import type { OutboundGate } from './ingest-pressure.ts';
import { messageBody } from './message-body.ts';
import type { OutboundQueue } from './outbound-queue.ts';
import {
  advanceRecoverTask,
  claimRecoverTask,
  deliveryTargets,
  finishRecoverTask,
  nextTaskDelivery,
  releaseRecoverTask,
  reserveEndpointSlot,
  type RecoverTaskRow,
} from './queries.ts';

/** A task's messages at most, a recovery's or a bulk retry's (as Svix's `RECOVER_LIMIT`). */
export const RECOVER_LIMIT = 10_000;
/** How far back a recovery or a bulk retry may reach (as Svix: 14 days, plus 5 minutes of clock skew). */
export const RECOVER_MAX_AGE_MS = 14 * 86_400_000 + 5 * 60_000;

/**
 * Runs the tasks that re-send a filtered set of an endpoint's messages: recoveries (`POST …/recover`, its
 * failed messages of a window) and bulk retries (`POST …/message-retries`, the message log's filter). One task
 * at a time per instance, its messages one at a time in (created_at, message_id) order, each a new attempt
 * of the same message without a retry schedule.
 * A task is held by a lease renewed after each message, so another instance takes over one whose worker
 * died; it stops at the first failed attempt, so the receiver never gets a later message before an earlier one.
 */
export class RecoveryRunner {
  private current: Promise<void> | undefined;

  constructor(
    private readonly em: EntityManager,
    private readonly queue: OutboundQueue,
    private readonly attempts: AttemptMaker,
    private readonly gate: OutboundGate,
    private readonly config: OutboundWebhookConfig,
    private readonly log: Logger,
    /** The fan-out's outage log: both poll the same database on the same timer. */
    private readonly outage?: OutageLog,
  ) {}

  /** A lease outlives one attempt and its record. */
  private get leaseMs(): number {
    return this.config.timeoutMs * 2 + 5_000;
  }

  /** Starts a task no worker holds, unless this instance runs one already. */
  poll(running: () => boolean): void {
    this.current ??= this.runClaimed(running)
      .catch((error: unknown) => {
        if (this.outage && isDatabaseUnavailable(error)) this.outage.failed(error);
        else this.log.error({ err: error }, 'webhook recovery failed');
      })
      .finally(() => (this.current = undefined));
  }

  /** Resolves once the task in progress has let go (it stops between two messages). */
  async stopped(): Promise<void> {
    await this.current;
  }

  private async runClaimed(running: () => boolean): Promise<void> {
    let task = await claimRecoverTask(this.em, this.leaseMs);
    while (task && running()) {
      const next = await nextTaskDelivery(this.em, task);
      if (!next || task.sent >= task.total) {
        await finishRecoverTask(this.em, task.id, 'completed', null);
        return;
      }
      const outcome = await this.gate.run(() => this.resend(next.message_id, task!));
      task = await advanceRecoverTask(this.em, {
        id: task.id,
        createdAt: next.created_at,
        messageId: next.message_id,
        sent: outcome === 'skipped' ? 0 : 1,
        succeeded: outcome === 'succeeded' ? 1 : 0,
        leaseMs: this.leaseMs,
      });
      if (task && typeof outcome === 'object') {
        await finishRecoverTask(this.em, task.id, 'failed', `${next.message_id}: ${outcome.error}`);
        return;
      }
    }
    if (task) await releaseRecoverTask(this.em, task.id);
  }

  /** One new attempt of the message at the task's endpoint: `skipped` when it left the task's state meanwhile (retried, say). */
  private async resend(messageId: string, task: RecoverTaskRow): Promise<'succeeded' | 'skipped' | { error: string }> {
    const endpointId = task.endpoint_id;
    const [row] = await deliveryTargets(this.em, messageId, endpointId);
    if (!row || row.state !== task.status) return 'skipped';
    // A rate-limited endpoint's recovery keeps to its rate too: one message at a time, each at its slot.
    if (row.rate_limit !== null) {
      const turn = await reserveEndpointSlot(this.em, endpointId, 1_000 / row.rate_limit, Number.MAX_SAFE_INTEGER);
      await new Promise((resolve) => setTimeout(resolve, turn.waitMs));
    }
    const made = await this.attempts.make(row, row.attempts + 1, () => messageBody(this.em, row));
    if (!made) return 'skipped';
    const [recorded] = await recordAttempts(this.em.getConnection().getKnex(), this.queue, this.config, [made], { retries: false });
    if (!recorded) return 'skipped';
    this.log.info({ messageId, endpointId, task: task.kind, attempt: recorded.attempt, statusCode: recorded.result.statusCode, outcome: recorded.outcome }, 'webhook recovery attempt');
    return recorded.succeeded ? 'succeeded' : { error: recorded.result.error ?? 'failed' };
  }
}
