/**
 * Delivery on an instance of its own (docs/scaling.md, "A delivery instance"): the settings of each side,
 * as `npm run cluster` and the benches start them.
 */

/** The webhook's instances store messages and never deliver them. */
export const WEBHOOK_INSTANCE_ENV = { OUTBOUND_WEBHOOK_WORKER: 'false' } as const;

/** A delivery instance delivers; the indexer stays with the webhook, whose load it yields to (docs/search.md). */
export const DELIVERY_INSTANCE_ENV = { OUTBOUND_WEBHOOK_WORKER: 'true', SEARCH_INDEXER: 'false' } as const;

/** BENCH_DELIVERY_INSTANCE: the delivery instance's niceness (0–19) when a bench splits the server in two; undefined when it does not. */
export function benchDeliveryNice(): number | undefined {
  const raw = process.env.BENCH_DELIVERY_INSTANCE;
  if (!raw) return undefined;
  const nice = Number(raw);
  if (!(Number.isInteger(nice) && nice >= 0 && nice <= 19)) throw new Error(`BENCH_DELIVERY_INSTANCE must be a niceness from 0 to 19, got "${raw}"`);
  return nice;
}
