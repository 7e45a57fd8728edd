/**
 * For measuring ingestion with outbound webhooks subscribed (issue 21): creates `--count` (10)
 * endpoints subscribed to `conversation.events` for the user with `--email`, pointing at a local
 * sink this script runs on `--sink-port` (answers 204 at once, prints what it received each 5 s),
 * until Ctrl-C, which deletes those endpoints again. The server under test needs
 * OUTBOUND_WEBHOOK_ALLOW_HTTP=true and OUTBOUND_WEBHOOK_ALLOW_PRIVATE=true (the sink is on loopback).
 *
 *   npm run webhook-bench-endpoints -- --email bench@example.com --count 10 --sink-port 39123
 *
 * Same database as the server (`DATABASE_URL`, or the embedded one under `DATA_DIR`).
 */
import http from 'node:http';
import { parseArgs } from 'node:util';
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/db/database.ts';
import { createLogger } from '../src/logger.ts';
import { PgBossOutboundQueue } from '../src/outbound/outbound-queue.ts';
import { WebhookEndpointService } from '../src/outbound/webhook-endpoint-service.ts';
import { secretBoxFor } from '../src/workspaces/setup.ts';
import { personalPrincipal } from './lib/personal-principal.ts';

const { values } = parseArgs({
  options: { email: { type: 'string' }, count: { type: 'string', default: '10' }, 'sink-port': { type: 'string', default: '39123' } },
});
if (!values.email) {
  console.error('usage: webhook-bench-endpoints --email E [--count 10] [--sink-port 39123]');
  process.exit(2);
}
const count = Number(values.count);
const port = Number(values['sink-port']);
const config = loadConfig();
const logger = createLogger('warn');

let received = 0;
let bytes = 0;
const sink = http.createServer((request, response) => {
  request.on('data', (chunk: Buffer) => (bytes += chunk.length));
  request.on('end', () => {
    received++;
    response.statusCode = 204;
    response.end();
  });
});
await new Promise<void>((resolve) => sink.listen(port, '127.0.0.1', resolve));

const database = await openDatabase(config.database, logger);
const [user] = await database.orm.em.getConnection().execute<{ id: string }[]>('select id from users where email = ?', [values.email]);
if (!user) {
  console.error(`no user with e-mail ${values.email}`);
  process.exit(1);
}
// Endpoints are unlimited here: the bench's count is the point, not the per-user limit.
const service = new WebhookEndpointService(database.orm.em, secretBoxFor(config, logger), {
  ...config.outboundWebhooks,
  allowHttp: true,
  maxEndpoints: Number.MAX_SAFE_INTEGER,
}, new PgBossOutboundQueue(database.orm.em.getConnection().getKnex(), logger));
const principal = personalPrincipal(user.id, values.email!);
const ids: string[] = [];
for (let i = 0; i < count; i++) {
  const endpoint = await service.create(principal, { url: `http://127.0.0.1:${port}/sink/${i}`, event_types: ['conversation.events'] });
  ids.push(endpoint.id);
}
console.log(JSON.stringify({ endpoints: ids.length, sink: `http://127.0.0.1:${port}/` }));
const report = setInterval(() => console.log(JSON.stringify({ received, bytes })), 5_000);

const stop = async () => {
  clearInterval(report);
  for (const id of ids) await service.delete(principal, id);
  console.log(JSON.stringify({ removed: ids.length, received, bytes }));
  sink.close();
  await database.close();
  process.exit(0);
};
process.on('SIGINT', () => void stop());
process.on('SIGTERM', () => void stop());
