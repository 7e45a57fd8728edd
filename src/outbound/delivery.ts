import type { EntityManager } from '@mikro-orm/postgresql';
import type { OutboundWebhookConfig } from '../config.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import type { Logger } from '../logger.ts';
import { AttemptMaker, type DeliveryRow } from './attempt.ts';
import { recordAttempts, type AttemptOutcome, type JudgedAttempt } from './attempt-record.ts';
import { messageBodies, messageBody } from './message-body.ts';
import type { DeliveryJob, OutboundQueue, QueuedDelivery } from './outbound-queue.ts';
import { deliveryTargetsOf, reserveEndpointSlot } from './queries.ts';

export interface DeliveryObserver {
  attempt(type: string, outcome: AttemptOutcome, seconds: number): void;
}

/** Runs delivery jobs: their attempts, then their record. */
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
    const [outcome] = await this.deliverAll([job]);
    if (outcome!.status === 'rejected') throw outcome!.reason;
  }

  /**
   * `deliver` for the jobs of one fetch together: their deliveries read in one statement, their
   * attempts recorded in one transaction. A job whose attempts could not be made fails alone; when
   * the shared record fails, each job's is tried on its own, so that one bad job never fails the others.
   */
  async deliverAll(jobs: readonly DeliveryJob[]): Promise<PromiseSettledResult<void>[]> {
    const rows = await deliveryTargetsOf(
      this.em,
      jobs.map((job) => ({ messageId: job.message_id, endpointId: job.endpoint_id ?? null })),
    );
    const deferred: QueuedDelivery[] = [];
    const claimed = new Set<string>();
    const bodies = new Bodies(this.em, rows);
    const made = await Promise.allSettled(
      jobs.map(async (job) => {
        // A delivery two jobs of the fetch name (a first attempt and a retry) is attempted by the first only.
        const mine = rows.filter((row) => row.id === job.message_id && (!job.endpoint_id || row.endpoint_id === job.endpoint_id) && !claimed.has(key(row)));
        for (const row of mine) claimed.add(key(row));
        const attempts = await Promise.all(
          mine.map(async (row) => {
            if (!(await this.takeTurn(row, job, deferred))) return undefined;
            return this.attempts.make(row, job.attempt, () => bodies.of(row));
          }),
        );
        return attempts.filter((attempt) => attempt !== undefined);
      }),
    );
    const knex = this.em.getConnection().getKnex();
    if (deferred.length > 0) await knex.transaction((trx) => this.queue.enqueueDeliveries(trx, deferred));
    const outcomes: PromiseSettledResult<void>[] = made.map((m) => (m.status === 'fulfilled' ? { status: 'fulfilled', value: undefined } : m));
    const ready = made.flatMap((m, i) => (m.status === 'fulfilled' ? [{ i, attempts: m.value }] : []));
    try {
      this.report(jobs, await recordAttempts(knex, this.queue, this.config, ready.flatMap((r) => r.attempts)));
    } catch (error) {
      if (ready.length <= 1) {
        for (const r of ready) outcomes[r.i] = { status: 'rejected', reason: error };
      } else {
        for (const r of ready) {
          try {
            this.report(jobs, await recordAttempts(knex, this.queue, this.config, r.attempts));
          } catch (alone) {
            outcomes[r.i] = { status: 'rejected', reason: alone };
          }
        }
      }
    }
    return outcomes;
  }

  private report(jobs: readonly DeliveryJob[], recorded: JudgedAttempt[]): void {
    for (const o of recorded) {
      this.observer?.attempt(o.row.type, o.outcome, o.result.durationMs / 1000);
      this.log.info(
        { messageId: o.row.id, endpointId: o.row.endpoint_id, type: o.row.type, attempt: o.attempt, statusCode: o.result.statusCode, outcome: o.outcome, ms: o.result.durationMs, jobs: jobs.length },
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

/**
 * The bodies of a fetch's messages as bytes, read in one statement when the first is wanted; a message
 * whose body that statement could not give is read on its own (one bad message never fails the others).
 */
class Bodies {
  private all: Promise<Map<string, string>> | undefined;
  private readonly bytes = new Map<string, Promise<Buffer>>();

  constructor(
    private readonly em: EntityManager,
    private readonly rows: readonly DeliveryRow[],
  ) {}

  of(row: DeliveryRow): Promise<Buffer> {
    let body = this.bytes.get(row.id);
    if (!body) {
      this.all ??= messageBodies(this.em, [...new Map(this.rows.map((r) => [r.id, r])).values()]);
      body = this.all.then(
        (texts) => texts.get(row.id) ?? messageBody(this.em, row),
        () => messageBody(this.em, row),
      ).then((text) => Buffer.from(text));
      this.bytes.set(row.id, body);
    }
    return body;
  }
}

const key = (row: DeliveryRow) => `${row.id}/${row.endpoint_id}`;

/** The longest a job waits for a rate-limited endpoint's slot before handing the attempt to a later job. */
const MAX_THROTTLE_WAIT_MS = 1_000;
