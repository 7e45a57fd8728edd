import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { expect } from 'chai';
import pg from 'pg';
import { minimalEvent } from '../fixtures/events.ts';
import { openEventStream, type EventStream } from '../helpers/event-stream.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { describeProcesses, killPids, processesWithEnv } from '../../scripts/lib/process-scan.ts';
import {
  createDataDir,
  describeRun,
  freePort,
  killAllProcesses,
  spawnNode,
  spawnProcess,
  stopLeftoverPostgres,
  waitFor,
  type RunningProcess,
} from '../helpers/server-process.ts';
import { webhookPath } from '../helpers/webhook.ts';
import { Receiver } from '../helpers/outbound.ts';

/**
 * `npm run cluster`: PostgreSQL, PgBouncer in transaction pooling mode and several server instances
 * (scripts/cluster.ts). Needs Debian's `pgbouncer` (`.ci/run` installs it); skipped without it.
 */
const PGBOUNCER = [process.env.PGBOUNCER, ...(process.env.PATH ?? '').split(':').map((dir) => path.join(dir, 'pgbouncer')), '/usr/sbin/pgbouncer']
  .filter((file): file is string => !!file)
  .find((file) => {
    try {
      fs.accessSync(file, fs.constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });
}

/** The first of `count` consecutive free loopback ports (the cluster's instances take consecutive ports). */
async function consecutiveFreePorts(count: number): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const first = 20_000 + Math.floor(Math.random() * 30_000);
    let free = true;
    for (let i = 0; i < count && free; i++) free = await portIsFree(first + i);
    if (free) return first;
  }
  throw new Error(`no ${count} consecutive free ports`);
}

interface Cluster {
  run: RunningProcess;
  dataDir: string;
  pgbouncerPort: number;
  /** The latest pid and URL printed for each instance (1-based, as the script numbers them). */
  instances(): { url: string; pid: number }[];
}

type Event = Record<string, unknown>;

describe('npm run cluster (PostgreSQL, PgBouncer in transaction pooling mode, N instances)', function () {
  this.timeout(120_000);
  const dataDirs: string[] = [];

  before(function () {
    if (!PGBOUNCER) {
      console.log('      (skipped: pgbouncer is not installed; Debian: apt-get install pgbouncer)');
      this.skip();
    }
  });

  afterEach(async () => {
    await killAllProcesses();
    for (const dir of dataDirs) {
      killPids(processesWithEnv('CLUSTER_DATA_DIR', dir).filter((pid) => pid !== postmasterOf(dir)));
      await stopLeftoverPostgres(dir);
    }
  });

  after(() => {
    for (const dir of dataDirs) fs.rmSync(dir, { recursive: true, force: true });
  });

  const postmasterOf = (dir: string) => {
    try {
      return Number(fs.readFileSync(path.join(dir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
    } catch {
      return undefined;
    }
  };

  async function startCluster(extra: NodeJS.ProcessEnv, launch: 'npm' | 'node'): Promise<Cluster> {
    const dataDir = createDataDir('cluster');
    dataDirs.push(dataDir);
    const instances = Number(extra.CLUSTER_INSTANCES) + Number(extra.CLUSTER_DELIVERY_INSTANCES ?? 0);
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      CLUSTER_DATA_DIR: dataDir,
      CLUSTER_PORT: String(await consecutiveFreePorts(instances)),
      CLUSTER_PGBOUNCER_PORT: String(await freePort()),
      CLUSTER_EMBEDDED_PG_PORT: String(await freePort()),
      LOG_LEVEL: 'warn',
      SHUTDOWN_GRACE_MS: '3000',
      // One user opens a live stream per conversation and instance at once: a durability test, not the limiter's.
      RATE_LIMIT_STREAMS: 'off',
      RATE_LIMIT_READS: 'off',
      ...extra,
    };
    if (!extra.DATABASE_URL) delete env.DATABASE_URL;
    delete env.DATABASE_APPLICATION_NAME;
    const run = launch === 'npm' ? spawnProcess('npm', ['run', '--silent', 'cluster'], env) : spawnNode('scripts/cluster.ts', [], env);
    const ready = await waitFor(() => run.stdout.includes('cluster ready') || run.child.exitCode !== null, 90_000);
    expect(ready && run.stdout.includes('cluster ready'), `the cluster did not start\n${describeRun(run)}`).to.equal(true);
    return {
      run,
      dataDir,
      pgbouncerPort: Number(env.CLUSTER_PGBOUNCER_PORT),
      instances() {
        const latest = new Map<number, { url: string; pid: number }>();
        for (const match of run.stdout.matchAll(/^instance (\d+) (http:\S+) pid (\d+)/gm)) {
          latest.set(Number(match[1]), { url: match[2]!, pid: Number(match[3]) });
        }
        return [...latest.keys()].sort((a, b) => a - b).map((k) => latest.get(k)!);
      },
    };
  }

  it('starts an embedded PostgreSQL, PgBouncer and 2 instances; SIGTERM to npm stops them all and leaves no process behind', async () => {
    const cluster = await startCluster({ CLUSTER_INSTANCES: '2' }, 'npm');
    const instances = cluster.instances();
    expect(instances).to.have.length(2);
    expect(new URL(instances[1]!.url).port).to.equal(String(Number(new URL(instances[0]!.url).port) + 1));
    for (const instance of instances) expect((await fetch(`${instance.url}/readyz`)).status).to.equal(200);
    const started = processesWithEnv('CLUSTER_DATA_DIR', cluster.dataDir);
    const commands = describeProcesses(started);
    expect(commands).to.match(/pgbouncer/);
    expect(commands).to.match(/postgres/);

    cluster.run.child.kill('SIGTERM');
    const exit = await cluster.run.exited;
    expect(exit.code, describeRun(cluster.run)).to.equal(0);
    await waitFor(() => processesWithEnv('CLUSTER_DATA_DIR', cluster.dataDir).length === 0, 5_000);
    const left = processesWithEnv('CLUSTER_DATA_DIR', cluster.dataDir);
    expect(left, `processes left behind:\n${describeProcesses(left)}`).to.deep.equal([]);
    for (const instance of instances) {
      const refused = await fetch(`${instance.url}/healthz`).then(
        () => false,
        () => true,
      );
      expect(refused, `${instance.url} still answers`).to.equal(true);
    }
  });

  it('4 instances through PgBouncer (pool 10), one SIGKILLed mid-load and restarted: every acknowledged event stored once, seq without gaps, every live subscriber sees every event, PostgreSQL connections through PgBouncer never above its pool (plus one listener and the job queue\'s pool per instance, direct)', async () => {
    const POOL = 10;
    const INSTANCES = 4;
    const CONVERSATIONS = 8;
    const BATCHES = 48;
    const BATCH_SIZE = 5;
    // The outbound-webhook job queue (pg-boss) keeps its own direct pool per instance, on DATABASE_LISTEN_URL: concurrency + 2.
    const QUEUE_CONCURRENCY = 2;
    const QUEUE_PER_INSTANCE = QUEUE_CONCURRENCY + 2;
    // Connections of earlier tests in this run (their apps' live listeners) are not the cluster's.
    const [clusterStart] = await testDatabase().orm.em.getConnection().execute<{ at: Date }[]>('select clock_timestamp() as at');
    const cluster = await startCluster(
      {
        CLUSTER_INSTANCES: String(INSTANCES),
        CLUSTER_POOL_SIZE: String(POOL),
        DATABASE_URL: testDatabase().url,
        CREDENTIAL_CACHE_TTL_MS: '0',
        OUTBOUND_WEBHOOK_CONCURRENCY: String(QUEUE_CONCURRENCY),
      },
      'node',
    );
    const urls = cluster.instances().map((instance) => instance.url);
    expect(urls).to.have.length(INSTANCES);
    expect(fs.readFileSync(path.join(cluster.dataDir, 'instance-1.log'), 'utf8')).not.to.include('statement_timeout differs');
    const user: UserFixture = await createUserFixture();
    // The pooler's server connections carry DB_QUERY_TIMEOUT_MS (the client cannot send it through PgBouncer).
    const pooled = new URL(testDatabase().url);
    pooled.port = String(cluster.pgbouncerPort);
    const viaPgbouncer = new pg.Client({ connectionString: pooled.href });
    await viaPgbouncer.connect();
    expect((await viaPgbouncer.query('show statement_timeout')).rows[0]).to.deep.equal({ statement_timeout: '30s' });
    await viaPgbouncer.end();

    // PostgreSQL's own count of connections to this database, but for this test's own.
    const sampler = new pg.Client({ connectionString: testDatabase().url, application_name: 'agent-platform-tests' });
    await sampler.connect();
    const samples: { total: number; listeners: number; queue: number }[] = [];
    const sample = async () => {
      const { rows } = await sampler.query<{ total: string; listeners: string; queue: string }>(
        `select count(*) as total, count(*) filter (where application_name = 'live-activity-listener') as listeners,
                count(*) filter (where application_name = 'agent-platform-webhooks') as queue
           from pg_stat_activity
          where datname = current_database() and backend_type = 'client backend' and application_name <> 'agent-platform-tests'
            and backend_start >= $1`,
        [clusterStart!.at],
      );
      samples.push({ total: Number(rows[0]!.total), listeners: Number(rows[0]!.listeners), queue: Number(rows[0]!.queue) });
    };

    const sent = new Map<string, string[]>();
    /** Delivers a batch like the agent runtime does: a failure (no answer, non-2xx) is retried on the next instance. */
    async function deliver(conversationId: string, batch: Event[], instance: number): Promise<void> {
      for (let attempt = 0; attempt < 200; attempt++) {
        const url = urls[(instance + attempt) % urls.length]!;
        try {
          const response = await fetch(`${url}${webhookPath(conversationId)}`, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json', 'X-Session-API-Key': user.sessionApiKey },
            body: JSON.stringify(batch),
            signal: AbortSignal.timeout(15_000),
          });
          await response.arrayBuffer();
          if (response.status === 200) return;
        } catch {
          // no answer: the instance is down (killed) or the connection was reset
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      throw new Error(`batch for ${conversationId} never acknowledged`);
    }
    const batchFor = (conversationId: string): Event[] => {
      const batch = Array.from({ length: BATCH_SIZE }, () => minimalEvent('MessageEvent', { id: randomUUID() }));
      sent.get(conversationId)!.push(...batch.map((event) => event.id as string));
      return batch;
    };

    const conversations = Array.from({ length: CONVERSATIONS }, () => randomUUID());
    for (const [c, conversationId] of conversations.entries()) {
      sent.set(conversationId, []);
      await deliver(conversationId, batchFor(conversationId), c);
    }
    // Live subscribers on instances 2-4 (instance 1 is the one killed), for every conversation.
    const streams: { conversationId: string; stream: EventStream }[] = [];
    for (const conversationId of conversations) {
      for (const url of urls.slice(1)) {
        const stream = await openEventStream(`${url}/api/v1/conversations/${conversationId}/events/stream`, { 'X-Access-Token': user.accessToken });
        expect(stream.status).to.equal(200);
        streams.push({ conversationId, stream });
      }
    }

    let sampling = true;
    const sampled = (async () => {
      while (sampling) {
        await sample();
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    let acknowledged = 0;
    const victim = cluster.instances()[0]!;
    const started = performance.now();
    await Promise.all(
      conversations.map(async (conversationId, c) => {
        for (let b = 1; b <= BATCHES; b++) {
          await deliver(conversationId, batchFor(conversationId), c + b);
          if (++acknowledged === Math.floor((CONVERSATIONS * BATCHES) / 3)) process.kill(victim.pid, 'SIGKILL');
        }
      }),
    );
    const loadSeconds = (performance.now() - started) / 1000;

    // The cluster started the killed instance again; it takes batches like the others.
    const restarted = await waitFor(() => cluster.instances()[0]!.pid !== victim.pid, 60_000);
    expect(restarted, `instance 1 was not started again\n${describeRun(cluster.run)}`).to.equal(true);
    expect(cluster.run.stdout).to.match(/instance 1 exited \(SIGKILL\): starting it again/);
    for (const conversationId of conversations) await deliver(conversationId, batchFor(conversationId), 0);

    // Every acknowledged event stored exactly once, seq 1..n without gaps.
    for (const conversationId of conversations) {
      const rows = (await testDatabase()
        .orm.em.getConnection()
        .execute('select event_id as id, seq from conversation_events where conversation_id = ? order by seq', [conversationId])) as { id: string; seq: number }[];
      const ids = rows.map((row) => row.id);
      expect(ids.length, 'no duplicate events').to.equal(new Set(ids).size);
      expect(new Set(ids), 'every acknowledged event stored, nothing else').to.deep.equal(new Set(sent.get(conversationId)));
      expect(rows.map((row) => Number(row.seq)), 'seq 1..n without gaps').to.deep.equal(rows.map((_, i) => i + 1));
    }
    // Every subscriber saw every event, in order, once.
    const expected = (1 + BATCHES + 1) * BATCH_SIZE;
    for (const { conversationId, stream } of streams) {
      const events = () => stream.parser.messages.filter((message) => message.event === 'event');
      const complete = await stream.until(() => events().length >= expected, 20_000);
      const seen = events().map((message) => JSON.parse(message.data) as { seq: number; event: { id: string } });
      expect(complete, `a subscriber of ${conversationId} saw ${seen.length} of ${expected} events`).to.equal(true);
      expect(seen.map((event) => event.seq)).to.deep.equal(Array.from({ length: expected }, (_, i) => i + 1));
      expect(new Set(seen.map((event) => event.event.id))).to.deep.equal(new Set(sent.get(conversationId)));
      stream.close();
    }
    sampling = false;
    await sampled;
    await sampler.end();

    const maxPooled = Math.max(...samples.map((s) => s.total - s.listeners - s.queue));
    const maxTotal = Math.max(...samples.map((s) => s.total));
    const maxListeners = Math.max(...samples.map((s) => s.listeners));
    const maxQueue = Math.max(...samples.map((s) => s.queue));
    console.log(
      `      cluster: ${CONVERSATIONS * BATCHES * BATCH_SIZE} events in ${loadSeconds.toFixed(1)} s through ${INSTANCES} instances ` +
        `(one SIGKILLed) = ${((CONVERSATIONS * BATCHES * BATCH_SIZE) / loadSeconds).toFixed(0)} events/s; PostgreSQL connections ` +
        `max ${maxTotal} over ${samples.length} samples: through PgBouncer max ${maxPooled} (pool ${POOL}), listeners max ${maxListeners} ` +
        `(${INSTANCES} instances), job queue max ${maxQueue} (${INSTANCES} × ${QUEUE_PER_INSTANCE})`,
    );
    expect(samples.length).to.be.greaterThan(5);
    expect(maxPooled, 'connections through PgBouncer: at most its pool').to.be.at.most(POOL);
    expect(maxListeners).to.be.at.most(INSTANCES);
    expect(maxQueue).to.be.at.most(INSTANCES * QUEUE_PER_INSTANCE);
    expect(maxTotal, 'PostgreSQL connections: the pool, one listener and the queue per instance').to.be.at.most(POOL + INSTANCES * (1 + QUEUE_PER_INSTANCE));

    // Throughput through four instances against one (a figure for docs/scaling.md, not an assertion:
    // on a shared two-core machine the instances compete with PostgreSQL for the same cores).
    const throughput = async (targets: number[]): Promise<number> => {
      let events = 0;
      const until = performance.now() + 2_000;
      const began = performance.now();
      await Promise.all(
        Array.from({ length: 16 }, async (_, k) => {
          const conversationId = randomUUID();
          sent.set(conversationId, []);
          for (let b = 0; performance.now() < until; b++) {
            await deliver(conversationId, batchFor(conversationId), targets[(k + b) % targets.length]!);
            events += BATCH_SIZE;
          }
        }),
      );
      return events / ((performance.now() - began) / 1000);
    };
    const four = await throughput([0, 1, 2, 3]);
    const one = await throughput([1]);
    console.log(`      cluster throughput (16 senders, batches of ${BATCH_SIZE}): 4 instances ${four.toFixed(0)} events/s, 1 instance ${one.toFixed(0)} events/s`);

    cluster.run.child.kill('SIGTERM');
    expect((await cluster.run.exited).code, describeRun(cluster.run)).to.equal(0);
    await waitFor(() => processesWithEnv('CLUSTER_DATA_DIR', cluster.dataDir).length === 0, 5_000);
    expect(describeProcesses(processesWithEnv('CLUSTER_DATA_DIR', cluster.dataDir))).to.equal('');
  });
  it('CLUSTER_DELIVERY_INSTANCES=1: one more instance, at nice 10, delivers the outbound webhooks; the webhook\'s instance stores them and delivers none', async () => {
    const receiver = await new Receiver().start();
    try {
      const cluster = await startCluster(
        {
          CLUSTER_INSTANCES: '1',
          CLUSTER_DELIVERY_INSTANCES: '1',
          DATABASE_URL: testDatabase().url,
          CREDENTIAL_CACHE_TTL_MS: '0',
          OUTBOUND_WEBHOOK_ALLOW_HTTP: 'true',
          OUTBOUND_WEBHOOK_ALLOW_PRIVATE: 'true',
        },
        'node',
      );
      const [front, delivery] = cluster.instances();
      expect(cluster.run.stdout, describeRun(cluster.run)).to.match(/^instance 2 http:\S+ pid \d+ \(delivers outbound webhooks, nice 10\)$/m);
      expect(cluster.run.stdout).to.include('cluster ready: 1 instances and 1 delivering outbound webhooks');
      expect(niceness(front!.pid)).to.equal(0);
      expect(niceness(delivery!.pid)).to.equal(10);

      const user = await createUserFixture();
      const created = await fetch(`${front!.url}/api/v1/webhook-endpoints`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Access-Token': user.accessToken },
        body: JSON.stringify({ url: receiver.url, event_types: ['conversation.events'] }),
      });
      expect(created.status, await created.clone().text()).to.equal(201);
      const conversationId = randomUUID();
      const batch = Array.from({ length: 3 }, () => minimalEvent('MessageEvent', { id: randomUUID() }));
      const posted = await fetch(`${front!.url}${webhookPath(conversationId)}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Session-API-Key': user.sessionApiKey },
        body: JSON.stringify(batch),
      });
      expect(posted.status).to.equal(200);

      const delivered = await waitFor(() => receiver.ofType('conversation.events').length > 0, 20_000);
      expect(delivered, 'nothing was delivered').to.equal(true);
      const [message] = receiver.ofType('conversation.events');
      expect((message!.data.events as { id: string }[]).map((event) => event.id)).to.deep.equal(batch.map((event) => event.id));
      // Who made the attempt: each instance counts its own.
      const succeeded = async (url: string) => {
        const text = await (await fetch(`${url}/metrics`)).text();
        const line = text.split('\n').find((l) => l.startsWith('outbound_webhook_attempts_total{') && l.includes('outcome="succeeded"'));
        return line ? Number(line.split(' ').at(-1)) : 0;
      };
      // The attempt is counted once recorded, a moment after the receiver has it.
      const counted = await waitFor(async () => (await succeeded(delivery!.url)) === 1, 10_000);
      expect(counted, `the delivery instance counts ${await succeeded(delivery!.url)} succeeded attempts`).to.equal(true);
      expect(await succeeded(front!.url)).to.equal(0);
    } finally {
      await receiver.stop();
    }
  });
});

/** A process's nice value (field 19 of /proc/<pid>/stat). */
function niceness(pid: number): number {
  return Number(fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[16]);
}
