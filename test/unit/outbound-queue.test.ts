import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { createLogger } from '../../src/logger.ts';
import { PgBossOutboundQueue } from '../../src/outbound/outbound-queue.ts';
import { testDatabase } from '../helpers/hooks.ts';

describe('PgBossOutboundQueue (pg-boss in the caller\'s transaction)', () => {
  const sql = (text: string, params: unknown[] = []) => testDatabase().orm.em.getConnection().execute(text, params);
  const knex = () => testDatabase().orm.em.getConnection().getKnex();

  it('queues jobs only when the transaction that queues them commits, with the queue\'s settings', async () => {
    const queue = new PgBossOutboundQueue(knex(), createLogger('silent'));
    const rolledBack = knex().transaction(async (trx) => {
      await queue.enqueueDeliveries(trx, [{ message_id: 'msg_rolled_back', attempt: 1 }]);
      throw new Error('rolled back');
    });
    expect(await rolledBack.then(() => 'committed', (error: Error) => error.message)).to.equal('rolled back');
    const endpointId = randomUUID();
    const startAfter = new Date(Date.now() + 60_000);
    await knex().transaction((trx) =>
      queue.enqueueDeliveries(trx, [
        { message_id: 'msg_first', attempt: 1 },
        { message_id: 'msg_retry', endpoint_id: endpointId, attempt: 3, startAfter },
      ]),
    );
    const jobs = await sql(
      `select j.data, j.start_after, j.retry_limit = q.retry_limit and j.expire_seconds = q.expire_seconds as queue_settings
       from pgboss.job j join pgboss.queue q on q.name = j.name where j.name = 'webhook-delivery' order by j.data->>'message_id'`,
    );
    expect(jobs.map((j) => j.data)).to.deep.equal([
      { message_id: 'msg_first', attempt: 1 },
      { message_id: 'msg_retry', endpoint_id: endpointId, attempt: 3 },
    ]);
    expect(new Date(jobs[1]!.start_after as string).getTime()).to.equal(startAfter.getTime());
    expect(jobs.every((j) => j.queue_settings)).to.equal(true);
  });
});
