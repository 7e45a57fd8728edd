import { h } from '../../dom.ts';
import { failed, output, str, textOf, type Fields } from './common.ts';
import { oneOf, type CardFamily } from './family.ts';

/** The task tracker: the task list with each task's state in words and a sign (not colour alone). */

interface Task {
  title?: string;
  notes?: string;
  status?: string;
}

const STATES: Record<string, { sign: string; words: string }> = {
  todo: { sign: '○', words: 'to do' },
  in_progress: { sign: '◐', words: 'in progress' },
  done: { sign: '✓', words: 'done' },
};

function taskList(tasks: Task[]): HTMLElement {
  const counts = tasks.reduce<Record<string, number>>((sum, task) => ({ ...sum, [task.status ?? 'todo']: (sum[task.status ?? 'todo'] ?? 0) + 1 }), {});
  return h(
    'div',
    { class: 'tasks' },
    h('p', { class: 'hint' }, `${counts.done ?? 0} of ${tasks.length} done${counts.in_progress ? `, ${counts.in_progress} in progress` : ''}`),
    h(
      'ol',
      { class: 'task-list' },
      tasks.map((task) => {
        const state = STATES[task.status ?? 'todo'] ?? { sign: '?', words: String(task.status) };
        return h(
          'li',
          { class: 'task', 'data-state': task.status ?? 'todo' },
          h('span', { class: 'task-sign', 'aria-hidden': 'true' }, state.sign),
          h('span', { class: 'task-title' }, task.title ?? ''),
          h('span', { class: 'task-state' }, state.words),
          task.notes ? h('span', { class: 'task-notes hint' }, task.notes) : null,
        );
      }),
    ),
  );
}

function tasksOf(fields: Fields | undefined): Task[] {
  return Array.isArray(fields?.task_list) ? (fields.task_list as Task[]) : [];
}

export const taskTrackerCards: CardFamily = {
  name: 'task-tracker',
  handlesAction: (kind, tool) => kind === 'TaskTrackerAction' || tool === 'task_tracker',
  handlesObservation: oneOf('TaskTrackerObservation'),
  action(action) {
    const tasks = tasksOf(action);
    if (str(action.command) === 'plan' || tasks.length) return { summary: `Plan: ${tasks.length} task${tasks.length === 1 ? '' : 's'}`, body: [taskList(tasks)] };
    return { summary: 'View the task list', body: [] };
  },
  observation(observation, action) {
    if (failed(observation)) return [output(textOf(observation.content), true)];
    const tasks = tasksOf(observation);
    // A plan's list is drawn by its action already; a view shows the list it found.
    if (tasks.length && (str(action?.command) !== 'plan' || !tasksOf(action).length)) return [taskList(tasks)];
    const text = textOf(observation.content) || str(observation.content);
    return text && !tasks.length ? [h('p', { class: 'hint tool-note' }, text.split('\n', 1)[0]!)] : [];
  },
};
