/**
 * The ingest load of `npm run bench:delivery`, in a process of its own (the bench's process is the receiver):
 * batches of 5 of the bench kit's events (`events.mjs`) over 64 conversations (`--conversations C`), either closed loop
 * (`--events N` or `--seconds S`, 16 requests in flight) or open loop (`--rate R --seconds S`: a request
 * every 1/R s whatever the answers do, at most 64 in flight). Prints one JSON line:
 * {requests, events, seconds, requests_per_s, events_per_s, p50_ms, p99_ms, failed}.
 *
 *   node --import tsx scripts/lib/ingest-load.ts URL KEY KIT_DIR [--events N] [--seconds S] [--rate R] [--conversations C]
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';

const BATCH = 5;
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { events: { type: 'string' }, seconds: { type: 'string' }, rate: { type: 'string' }, conversations: { type: 'string' } },
});
const [url, key, kitDir] = positionals as [string, string, string];
const kit = (await import(pathToFileURL(path.join(kitDir, 'events.mjs')).href)) as {
  makeTemplate(n: number, seed: number): unknown;
  fillTemplate(t: unknown): string;
};
const templates = Array.from({ length: 256 }, (_, i) => kit.makeTemplate(BATCH, i + 1));
const conversations = Array.from({ length: Number(values.conversations ?? 64) }, () => randomUUID());
const rate = Number(values.rate ?? 0);
const agent = new http.Agent({ keepAlive: true, maxSockets: rate > 0 ? 64 : 16 });
const target = new URL(url);
const latencies: number[] = [];
let failed = 0;
let index = 0;

function send(): Promise<void> {
  const i = index++;
  const body = kit.fillTemplate(templates[i % templates.length]);
  const sentAt = performance.now();
  return new Promise((resolve) => {
    const request = http.request(
      {
        host: target.hostname,
        port: target.port,
        method: 'POST',
        path: `/api/v1/webhooks/events/${conversations[i % conversations.length]}`,
        agent,
        headers: { 'content-type': 'application/json', 'x-session-api-key': key, 'content-length': Buffer.byteLength(body) },
      },
      (response) => {
        const ok = (response.statusCode ?? 0) < 300;
        response.resume();
        response.on('end', () => {
          if (ok) latencies.push(performance.now() - sentAt);
          else failed++;
          resolve();
        });
      },
    );
    request.on('error', () => {
      failed++;
      resolve();
    });
    request.end(body);
  });
}

const started = performance.now();
if (rate > 0) {
  const seconds = Number(values.seconds ?? 30);
  const total = Math.round(seconds * rate);
  const inFlight = new Set<Promise<void>>();
  await new Promise<void>((done) => {
    const tick = setInterval(() => {
      const due = Math.min(total, Math.floor(((performance.now() - started) / 1000) * rate));
      while (index < due) {
        const sending = send();
        inFlight.add(sending);
        void sending.then(() => inFlight.delete(sending));
      }
      if (index >= total) {
        clearInterval(tick);
        done();
      }
    }, 1);
  });
  await Promise.all(inFlight);
} else {
  const requests = values.events ? Math.ceil(Number(values.events) / BATCH) : Infinity;
  const endAt = values.seconds ? started + Number(values.seconds) * 1000 : Infinity;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (index < requests && performance.now() < endAt) await send();
    }),
  );
}
const seconds = (performance.now() - started) / 1000;
latencies.sort((a, b) => a - b);
const pct = (p: number) => (latencies.length ? +latencies[Math.min(latencies.length - 1, Math.ceil((p / 100) * latencies.length) - 1)]!.toFixed(1) : null);
console.log(
  JSON.stringify({
    requests: latencies.length,
    events: latencies.length * BATCH,
    seconds: +seconds.toFixed(2),
    requests_per_s: Math.round(latencies.length / seconds),
    events_per_s: Math.round((latencies.length * BATCH) / seconds),
    p50_ms: pct(50),
    p99_ms: pct(99),
    failed,
  }),
);
agent.destroy();
