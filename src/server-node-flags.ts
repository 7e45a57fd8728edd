/**
 * The Node.js flags every server process runs with: `npm start`, `npm run start:prod` (package.json
 * repeats them; test/system/npm-start.test.ts checks that it does), the cluster's instances, the benches and
 * the tests' servers.
 *
 * `--max-semi-space-size=16` (MB): V8 13 (Node.js 24) sizes the young generation from the machine's
 * memory, 32 MB semi-spaces on a 24 GB machine against Node.js 20's 16. At 16 MB the server stays about
 * 100 MB smaller, an export grows its memory by 20–27 MB instead of 42–52, young-generation pauses are
 * shorter, and ingestion is unchanged (docs/performance.md, "Young-generation collections").
 */
export const SERVER_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=16'];

/** `node` arguments that start the server from its TypeScript entry (`src/main.ts` unless given) with `flags`. */
export function serverNodeArgs(entry = 'src/main.ts', flags: readonly string[] = SERVER_NODE_FLAGS): string[] {
  return [...flags, '--import', 'tsx', entry];
}
