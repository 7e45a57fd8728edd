import { h } from '../../dom.ts';
import { argumentsTable, failed, output, str, textOf, withoutKind, type Fields } from './common.ts';
import { oneOf, type CardFamily } from './family.ts';

/**
 * Calls whose arguments are the story: MCP tools, delegation and tasks for sub-agents, consulting
 * Tom or an advisor, skills, switching the LLM, vision, workflows, client tools, search tools (glob,
 * grep, list). The tool's name, then its arguments as a table.
 */

const NAMES = ['MCPTool', 'Delegate', 'Task', 'ConsultTom', 'ConsultAdvisor', 'SleeptimeCompute', 'InvokeSkill', 'SwitchLLM', 'VisionInspect', 'Workflow', 'Glob', 'Grep', 'ListDirectory'];
const ACTIONS = oneOf(...NAMES.map((name) => `${name}Action`));
const OBSERVATIONS = oneOf(...NAMES.map((name) => `${name}Observation`));

/** MCP actions carry their arguments in `data`; the others are their own arguments. */
function argumentsOf(action: Fields): Fields {
  return action.kind === 'MCPToolAction' && action.data && typeof action.data === 'object' ? (action.data as Fields) : withoutKind(action);
}

export const toolCallCards: CardFamily = {
  name: 'tool-call',
  handlesAction: (kind) => ACTIONS(kind) || kind.startsWith('ClientAction_'),
  handlesObservation: (kind) => OBSERVATIONS(kind) || kind.startsWith('ClientObservation'),
  action(action) {
    const kind = String(action.kind ?? '');
    const label = kind === 'MCPToolAction' ? 'MCP tool' : kind.startsWith('ClientAction_') ? `Client tool ${kind.slice('ClientAction_'.length)}` : kind.replace(/Action$/, '');
    return { summary: label, body: [argumentsTable(argumentsOf(action), `Arguments of ${label}`)] };
  },
  observation(observation) {
    const text = textOf(observation.content) || str(observation.content) || str(observation.output) || str(observation.error) || '';
    const isError = failed(observation);
    return text ? [output(text, isError, isError ? 'error' : 'result')] : [h('p', { class: 'hint tool-note' }, 'No output')];
  },
};
