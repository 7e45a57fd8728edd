import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../logger.ts';
import { ChunkedSweep } from './chunked-sweep.ts';
import { deleteExpiredIdempotencyRecords } from './queries.ts';

/**
 * Deletes idempotency records past their 24 h (`src/api/idempotency.ts`), every hour: an expired one is
 * already ignored (and reclaimed) by the requests.
 */
export class IdempotencyRecordRetention extends ChunkedSweep {
  constructor(
    private readonly em: EntityManager,
    log: Logger,
  ) {
    super(log, { firstMs: 15_000, everyMs: 3_600_000, failure: 'idempotency record sweep failed' });
  }

  protected deleteChunk(limit: number): Promise<number> {
    return deleteExpiredIdempotencyRecords(this.em, limit);
  }

  protected logDeleted(deleted: number): void {
    this.log.info({ deleted }, 'expired idempotency records deleted');
  }
}
