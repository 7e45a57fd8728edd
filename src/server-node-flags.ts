/** The Node.js flags of every server process; why 16 MB semi-spaces: docs/performance.md, "Young-generation collections". */
export const SERVER_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=16'];

/** `node` arguments that start the server from its TypeScript entry (`src/main.ts` unless given) with `flags`. */
export function serverNodeArgs(entry = 'src/main.ts', flags: readonly string[] = SERVER_NODE_FLAGS): string[] {
  return [...flags, '--import', 'tsx', entry];
}
