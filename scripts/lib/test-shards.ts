/** The pure parts of `npm test`'s shards (scripts/run-tests.ts): what goes where, and what came back. */

export const DEFAULT_GLOB = 'test/**/*.test.ts';

/** Files and globs go to the shards; everything else (options and their values) to each mocha. */
export function splitArguments(args: string[]): { patterns: string[]; options: string[] } {
  const isPattern = (arg: string) => !arg.startsWith('-') && (/\.(ts|js|mjs)$/.test(arg) || arg.includes('*'));
  const patterns: string[] = [];
  const options: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    // An option's value is the option's, even when it looks like a file (--require x.ts).
    if (arg.startsWith('-') && !arg.includes('=') && args[i + 1] !== undefined && !args[i + 1]!.startsWith('-') && !isPattern(args[i + 1]!)) {
      options.push(arg, args[++i]!);
    } else if (isPattern(arg)) patterns.push(arg);
    else options.push(arg);
  }
  return { patterns: patterns.length > 0 ? patterns : [DEFAULT_GLOB], options };
}

/** Longest first, each to the shard with the least so far; a file without a time counts as the median. */
export function balance(files: string[], count: number, timings: Record<string, number>): Array<{ files: string[]; expected: number }> {
  const known = Object.values(timings).sort((a, b) => a - b);
  const median = known.length > 0 ? known[Math.floor(known.length / 2)]! : 1;
  const weight = (file: string) => timings[file] ?? median;
  const shards = Array.from({ length: count }, () => ({ files: [] as string[], expected: 0 }));
  for (const file of [...files].sort((a, b) => weight(b) - weight(a))) {
    const lightest = shards.reduce((best, shard) => (shard.expected < best.expected ? shard : best));
    lightest.files.push(file);
    lightest.expected += weight(file);
  }
  // Within a shard the files run in name order, as mocha alone runs them.
  for (const shard of shards) shard.files.sort();
  return shards;
}

/** mocha's own summary lines of one shard's output (colours or not); undefined when it printed none. */
export function totalsOf(output: string): { passing: number; pending: number; failing: number } | undefined {
  const text = output.replace(/\x1b\[[0-9;]*m/g, '');
  const count = (word: string) => Number(new RegExp(`^ +(\\d+) ${word}`, 'm').exec(text)?.[1] ?? 0);
  if (!/^ +\d+ (passing|failing)/m.test(text)) return undefined;
  return { passing: count('passing'), pending: count('pending'), failing: count('failing') };
}
