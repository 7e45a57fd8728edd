/** Set by `npm test` (scripts/run-tests.ts) for each shard: its pid, which the shard's reaper watches too. */
export const TEST_RUNNER_PID_ENV = 'AGENT_PLATFORM_TEST_RUNNER_PID';
