import type { EntityManager } from '@mikro-orm/postgresql';
import type { OutboundWebhookConfig } from '../config.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import type { Logger } from '../logger.ts';
import { AttemptMaker, type DeliveryRow } from './attempt.ts';
import { recordAttempts, type AttemptOutcome } from './attempt-record.ts';
import { messageBody } from './message-body.ts';
import type { DeliveryJob, OutboundQueue, QueuedDelivery } from './outbound-queue.ts';
import { deliveryTargets, reserveEndpointSlot } from './queries.ts';

export interface DeliveryObserver {
  attempt(type: string, outcome: AttemptOutcome, seconds: number): void;
}

/** Runs one delivery job: its attempts, then their record. */
export class Deliverer {
  private readonly attempts: AttemptMaker;

  constructor(
    private readonly em: EntityManager,
    private readonly queue: OutboundQueue,
    box: SecretBox,
    private readonly config: OutboundWebhookConfig,
    private readonly log: Logger,
    private readonly observer?: DeliveryObserver,
  ) {
    this.attempts = new AttemptMaker(box, config, log);
  }

  /**
   * Makes attempt `job.attempt` of the message to the endpoint unless it was made already. Without
   * `endpoint_id` (a first attempt), to each of the message's deliveries, in parallel, with the body
   * read once.
   */
  async deliver(job: DeliveryJob): Promise<void> {
    const rows = await deliveryTargets(this.em, job.message_id, job.endpoint_id ?? null);
    let body: Promise<string> | undefined;
    const deferred: QueuedDelivery[] = [];
    const made = await Promise.all(
      rows.map(async (row) => {
        if (!(await this.takeTurn(row, job, deferred))) return undefined;
        return this.attempts.make(row, job.attempt, () => (body ??= messageBody(this.em, row)));
      }),
    );
    const knex = this.em.getConnection().getKnex();
    if (deferred.length > 0) await knex.transaction((trx) => this.queue.enqueueDeliveries(trx, deferred));
    const recorded = await recordAttempts(knex, this.queue, this.config, made.filter((attempt) => attempt !== undefined));
    for (const o of recorded) {
      this.observer?.attempt(o.row.type, o.outcome, o.result.durationMs / 1000);
      this.log.info(
        { messageId: job.message_id, endpointId: o.row.endpoint_id, type: o.row.type, attempt: o.attempt, statusCode: o.result.statusCode, outcome: o.outcome, ms: o.result.durationMs },
        'webhook attempt',
      );
    }
  }

  /**
   * A rate-limited endpoint's turn (`rate_limit`): a slot within `MAX_THROTTLE_WAIT_MS` is taken in the
   * database and waited for here; when the next free one is later, nothing is taken and the attempt
   * becomes a job of its own that comes back about then (false: not now), so every attempt starts at
   * its slot, never late enough to crowd the next ones.
   */
  private async takeTurn(row: DeliveryRow, job: DeliveryJob, deferred: QueuedDelivery[]): Promise<boolean> {
    if (row.rate_limit === null || !AttemptMaker.due(row, job.attempt)) return true;
    const turn = await reserveEndpointSlot(this.em, row.endpoint_id, 1_000 / row.rate_limit, MAX_THROTTLE_WAIT_MS);
    if (!turn.taken) {
      const comeBack = Math.max(0, turn.waitMs - MAX_THROTTLE_WAIT_MS / 2);
      deferred.push({ message_id: row.id, endpoint_id: row.endpoint_id, attempt: job.attempt, startAfter: new Date(Date.now() + comeBack) });
      return false;
    }
    if (turn.waitMs > 0) await new Promise((resolve) => setTimeout(resolve, turn.waitMs));
    return true;
  }
}

/** The longest a job waits for a rate-limited endpoint's slot before handing the attempt to a later job. */
const MAX_THROTTLE_WAIT_MS = 1_000;
