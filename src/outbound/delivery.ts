import type { EntityManager } from '@mikro-orm/postgresql';
import type { OutboundWebhookConfig } from '../config.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import type { Logger } from '../logger.ts';
import { AttemptMaker } from './attempt.ts';
import { recordAttempts, type AttemptOutcome } from './attempt-record.ts';
import { messageBody } from './message-body.ts';
import type { DeliveryJob, OutboundQueue } from './outbound-queue.ts';
import { deliveryTargets } from './queries.ts';

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
    const made = await Promise.all(rows.map((row) => this.attempts.make(row, job.attempt, () => (body ??= messageBody(this.em, row)))));
    const recorded = await recordAttempts(this.em.getConnection().getKnex(), this.queue, this.config, made.filter((attempt) => attempt !== undefined));
    for (const o of recorded) {
      this.observer?.attempt(o.row.type, o.outcome, o.result.durationMs / 1000);
      this.log.info(
        { messageId: job.message_id, endpointId: o.row.endpoint_id, type: o.row.type, attempt: o.attempt, statusCode: o.result.statusCode, outcome: o.outcome, ms: o.result.durationMs },
        'webhook attempt',
      );
    }
  }
}
