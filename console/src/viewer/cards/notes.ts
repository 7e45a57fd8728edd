import { h } from '../../dom.ts';
import { renderMarkdown } from '../markdown.ts';
import { output, str, textOf, failed } from './common.ts';
import { oneOf, type CardFamily } from './family.ts';

/** Think and finish: the agent's words as Markdown (through the sanitising renderer), once. */

export const thinkCards: CardFamily = {
  name: 'think',
  handlesAction: (kind, tool) => kind === 'ThinkAction' || tool === 'think',
  handlesObservation: oneOf('ThinkObservation'),
  action(action) {
    const thought = str(action.thought) ?? '';
    return { summary: 'Thought', body: [h('div', { class: 'text note-text' }, renderMarkdown(thought))] };
  },
  // "Your thought has been logged." adds nothing to the thought above it.
  observation: (observation) => (failed(observation) ? [output(textOf(observation.content), true)] : []),
};

export const finishCards: CardFamily = {
  name: 'finish',
  handlesAction: (kind, tool) => kind === 'FinishAction' || tool === 'finish',
  handlesObservation: oneOf('FinishObservation'),
  action(action) {
    return { summary: 'Finished', body: [h('div', { class: 'text note-text' }, renderMarkdown(str(action.message) ?? ''))] };
  },
  // The observation repeats the message; only something else (an error) is shown.
  observation(observation, action) {
    const text = textOf(observation.content);
    if (failed(observation)) return [output(text, true)];
    return text && text !== str(action?.message) ? [h('div', { class: 'text' }, renderMarkdown(text))] : [];
  },
};
