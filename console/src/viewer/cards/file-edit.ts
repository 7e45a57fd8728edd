import { h } from '../../dom.ts';
import { diffLines, linesOf, parsePatch, renderDiff, tryDiffLines, type DiffLine } from '../diff.ts';
import { failed, output, str, textOf, type Fields } from './common.ts';
import { oneOf, type CardFamily } from './family.ts';

/**
 * File edits: the path, then a unified diff of a replacement, insertion or patch (with the file's
 * own line numbers when the observation carries the file before and after), the new file of a
 * create, the range of a view.
 */

const ACTIONS = oneOf('FileEditorAction', 'StrReplaceEditorAction', 'PlanningFileEditorAction', 'EditAction', 'WriteFileAction', 'ApplyPatchAction', 'ReadFileAction');
const TOOLS = oneOf('file_editor', 'str_replace_editor', 'planning_file_editor', 'edit', 'write_file', 'apply_patch', 'read_file');
const OBSERVATIONS = oneOf('FileEditorObservation', 'StrReplaceEditorObservation', 'PlanningFileEditorObservation', 'EditObservation', 'WriteFileObservation', 'ApplyPatchObservation', 'ReadFileObservation');

/** The editor command of any of the classes: view, create, str_replace, insert, undo_edit, patch. */
function commandOf(action: Fields): string {
  switch (action.kind) {
    case 'EditAction':
      return 'str_replace';
    case 'WriteFileAction':
      return 'create';
    case 'ApplyPatchAction':
      return 'patch';
    case 'ReadFileAction':
      return 'view';
    default:
      return str(action.command) ?? (typeof action.patch === 'string' ? 'patch' : 'view');
  }
}

const VERBS: Record<string, string> = { view: 'Read', create: 'Create', str_replace: 'Edit', insert: 'Insert into', undo_edit: 'Undo the last edit of', patch: 'Patch' };

function pathOf(action: Fields): string {
  return str(action.path) ?? str(action.file_path) ?? '';
}

function rangeOf(action: Fields): string {
  const range = action.view_range;
  if (Array.isArray(range) && typeof range[0] === 'number') return range[1] === -1 || range[1] === undefined ? `lines ${range[0]} to the end` : `lines ${range[0]}–${String(range[1])}`;
  if (typeof action.offset === 'number' || typeof action.limit === 'number') {
    const first = (typeof action.offset === 'number' ? action.offset : 0) + 1;
    return typeof action.limit === 'number' ? `lines ${first}–${first + action.limit - 1}` : `lines ${first} to the end`;
  }
  return 'the whole file';
}

/** The file before and after, when the observation carries both (FileEditorObservation does). */
function contentsOf(observation: Fields | undefined): { before: string; after: string } | undefined {
  if (!observation || failed(observation)) return undefined;
  const before = str(observation.old_content) ?? (observation.prev_exist === false ? '' : undefined);
  const after = str(observation.new_content);
  return before !== undefined && after !== undefined ? { before, after } : undefined;
}

function linesFor(command: string, action: Fields, observation: Fields | undefined): DiffLine[] | undefined {
  const contents = contentsOf(observation);
  // The whole file gives real line numbers; when it is too large to diff quickly, the edit's own text.
  const whole = contents && command !== 'view' ? tryDiffLines(contents.before, contents.after) : undefined;
  if (whole) return whole;
  switch (command) {
    case 'create':
      return linesOf(str(action.file_text) ?? str(action.content) ?? '', 'add');
    case 'str_replace':
      return diffLines(str(action.old_str) ?? str(action.old_string) ?? '', str(action.new_str) ?? str(action.new_string) ?? '');
    case 'insert':
      return linesOf(str(action.new_str) ?? '', 'add', (typeof action.insert_line === 'number' ? action.insert_line : 0) + 1);
    default:
      return undefined;
  }
}

function pathLine(verb: string, path: string, extra?: string): HTMLElement {
  return h('p', { class: 'path' }, `${verb} `, h('code', { class: 'file-path' }, path || '(no path)'), extra ? h('span', { class: 'hint' }, ` · ${extra}`) : null);
}

export const fileEditCards: CardFamily = {
  name: 'file-edit',
  handlesAction: (kind, tool) => ACTIONS(kind) || TOOLS(tool),
  handlesObservation: OBSERVATIONS,
  action(action, observation) {
    const command = commandOf(action);
    const path = pathOf(action);
    const verb = VERBS[command] ?? command;
    if (command === 'patch') {
      const files = parsePatch(str(action.patch) ?? '');
      return {
        summary: `${verb} ${files.length} file${files.length === 1 ? '' : 's'}`,
        body: files.flatMap((file) => [pathLine(file.operation === 'add' ? 'Create' : file.operation === 'delete' ? 'Delete' : 'Patch', file.path), file.lines.length ? renderDiff(file.lines, `Changes to ${file.path}`) : null]),
      };
    }
    // The header names the verb; the path line under it names the file.
    if (command === 'view') return { summary: verb, body: [pathLine(verb, path, rangeOf(action))] };
    const lines = linesFor(command, action, observation);
    const extra = command === 'insert' && typeof action.insert_line === 'number' ? `after line ${action.insert_line}` : command === 'create' && !contentsOf(observation) ? 'new file' : undefined;
    return { summary: verb, body: [pathLine(verb, path, extra), lines?.length ? renderDiff(lines, `Changes to ${path}`) : null] };
  },
  observation(observation, action) {
    const text = textOf(observation.content) || str(observation.error) || '';
    if (failed(observation)) return [output(text, true)];
    if (action && commandOf(action) === 'view') return [output(text, false, 'file content')];
    // The diff above already shows the change; the tool's own words stay one click away.
    const firstLine = text.split('\n', 1)[0] ?? '';
    if (!text) return [h('p', { class: 'hint tool-note' }, 'Done')];
    return [text === firstLine ? h('p', { class: 'hint tool-note' }, text) : h('details', { class: 'tool-note' }, h('summary', null, firstLine), h('pre', { class: 'output', tabindex: 0 }, text))];
  },
};
