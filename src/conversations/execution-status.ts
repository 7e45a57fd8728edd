import type { components } from '../../generated/openapi.ts';

type Event = components['schemas']['Event'];
export type ExecutionStatus = NonNullable<components['schemas']['Conversation']['execution_status']>;

/** The agent-server's ConversationExecutionStatus values that we track. */
const EXECUTION_STATUSES: ReadonlySet<string> = new Set<ExecutionStatus>([
  'idle',
  'running',
  'paused',
  'waiting_for_confirmation',
  'finished',
  'error',
  'stuck',
  'deleting',
]);

function asStatus(value: unknown): ExecutionStatus | null {
  return typeof value === 'string' && EXECUTION_STATUSES.has(value) ? (value as ExecutionStatus) : null;
}

/**
 * The execution status a conversation has after `event`, or null when the event does not change
 * it (AgentErrorEvent, for one: the conversation can continue after a failed tool call).
 */
export function executionStatusAfter(event: Event): ExecutionStatus | null {
  switch (event.kind) {
    case 'InterruptEvent':
    case 'PauseEvent':
      return 'paused';
    case 'ConversationErrorEvent':
      return 'error';
    case 'ConversationStateUpdateEvent':
      if (event.key === 'execution_status') return asStatus(event.value);
      if (event.key === 'full_state' && event.value && typeof event.value === 'object') {
        return asStatus((event.value as Record<string, unknown>).execution_status);
      }
      return null;
    default:
      return null;
  }
}
