import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../logger.ts';
import { ChunkedSweep } from './chunked-sweep.ts';
import { keepResolvedRefusals } from '../refusals/queries.ts';
import { deleteExpiredRefusalNotices, deleteExpiredRefusals } from './queries.ts';

/**
 * Deletes refused deliveries not seen for `REFUSED_DELIVERY_RETENTION_DAYS` (and the hourly notice
 * marks older than that), every hour. Unlike conversation retention it is always on: the ledger keeps
 * bodies nobody asked to keep. It also keeps `resolved_at` of the refusals resolved since.
 */
export class RefusedDeliveryRetention extends ChunkedSweep {
  constructor(
    private readonly em: EntityManager,
    private readonly days: number,
    log: Logger,
  ) {
    super(log, { firstMs: 10_000, everyMs: 3_600_000, failure: 'refused delivery retention sweep failed' });
  }

  protected deleteChunk(limit: number): Promise<number> {
    return deleteExpiredRefusals(this.em, this.days, limit);
  }

  protected override async afterChunks(): Promise<void> {
    await deleteExpiredRefusalNotices(this.em, this.days);
    // Not a deletion: refusals resolved since the last sweep keep that answer, so reads stop probing their events.
    await keepResolvedRefusals(this.em);
  }

  protected logDeleted(deleted: number): void {
    this.log.info({ deleted, days: this.days }, 'refused delivery retention deleted expired refusals');
  }
}
