import { h } from '../../dom.ts';
import { failed, output, str, textOf, type Fields } from './common.ts';
import { oneOf, type CardFamily } from './family.ts';

/** Terminal commands: the command, then the exit code and the output (folded past 30 lines). */

const ACTIONS = oneOf('TerminalAction', 'ExecuteBashAction', 'BashAction');
const TOOLS = oneOf('terminal', 'execute_bash', 'bash');
const OBSERVATIONS = oneOf('TerminalObservation', 'ExecuteBashObservation', 'BashObservation');

function exitLabel(observation: Fields): string {
  if (observation.timeout === true) return 'timed out';
  if (typeof observation.exit_code === 'number' && observation.exit_code !== -1) return `exit ${observation.exit_code}`;
  return failed(observation) ? 'error' : 'output';
}

export const terminalCards: CardFamily = {
  name: 'terminal',
  handlesAction: (kind, tool) => ACTIONS(kind) || TOOLS(tool),
  handlesObservation: OBSERVATIONS,
  action(action) {
    const command = str(action.command) ?? '';
    const notes = [action.is_input === true ? 'sent to the running process' : null, typeof action.timeout === 'number' ? `timeout ${action.timeout} s` : null, action.reset === true ? 'resets the terminal' : null].filter(Boolean);
    return {
      summary: command.split('\n', 1)[0],
      body: [h('pre', { class: 'command', tabindex: 0 }, h('span', { class: 'prompt', 'aria-hidden': 'true' }, '$ '), command), notes.length ? h('p', { class: 'hint' }, notes.join(' · ')) : null],
    };
  },
  observation(observation) {
    const text = textOf(observation.content) || str(observation.output) || '';
    const label = exitLabel(observation);
    const isError = failed(observation) || observation.timeout === true;
    return [h('p', { class: 'exit' }, h('span', { class: isError ? 'bad' : 'ok', 'data-exit': String(observation.exit_code ?? '') }, isError ? `✕ ${label}` : `✓ ${label}`)), output(text, isError, 'output')];
  },
};
