/**
 * The Node.js flags every server process runs with: `npm start`, `npm run start:prod` (package.json
 * repeats them; test/npm-start.test.ts checks that it does), the cluster's instances, the benches and
 * the tests' servers.
 *
 * `--max-semi-space-size=16` (MB): V8 13 (Node.js 24) sizes the young generation from the machine's
 * memory, 32 MB semi-spaces on a 24 GB machine against Node.js 20's 16. Rows read through the
 * PostgreSQL driver survive young-generation collections at high rates (about half of what a page of
 * events allocates), so each collection of a 32 MB semi-space copied about 18 MB: 8–10 ms pauses that
 * set the p99 of page reads. At 16 MB the pauses halve, the export's memory grows less, and ingestion
 * is unchanged (docs/performance.md, "Runtime flags").
 */
export const SERVER_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=16'];
