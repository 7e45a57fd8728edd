/** The tests' embedded PostgreSQL port (shard 1's; TEST_EMBEDDED_PG_PORT overrides it), apart from `npm start`'s 25432 and the bench's 25449. */
export const TEST_PG_PORT = 25439;

/** Set by `npm test` (scripts/run-tests.ts) for each shard: its pid, which the shard's reaper watches too. */
export const TEST_RUNNER_PID_ENV = 'AGENT_PLATFORM_TEST_RUNNER_PID';

/** Shard k's servers listen in 21000 + 1000·(k−1) … +999 (TEST_PORTS, read by scripts/lib/free-port.ts): below the kernel's ephemeral range and our PostgreSQL ports (25432–25739). */
export function shardServerPorts(index: number): string {
  const first = 21_000 + 1_000 * (index - 1);
  return `${first}-${first + 999}`;
}
