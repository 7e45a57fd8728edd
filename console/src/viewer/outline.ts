import { h, replace } from '../dom.ts';
import type { ConversationRows, OutlineEntry } from './rows.ts';

/** Landmarks listed at most; older ones are reached by scrolling (or a link to the event). */
const SHOWN = 200;
const SIGNS: Record<OutlineEntry['type'], string> = { message: '“', error: '✕', edit: '✎' };
const WORDS: Record<OutlineEntry['type'], string> = { message: 'Message', error: 'Error', edit: 'File edit' };

/**
 * The outline of the loaded part of a conversation: its messages, errors and file edits, each a
 * button that jumps to the event. Collapsible; open from the start on wide screens.
 */
export class Outline {
  readonly element: HTMLDetailsElement;
  private readonly list = h('ol', { class: 'outline-list' });
  private readonly count = h('span', { class: 'hint' });
  private frame = 0;
  private shown = -1;

  constructor(
    private readonly rows: ConversationRows,
    private readonly jump: (seq: number) => void,
  ) {
    this.element = h('details', { class: 'outline', open: window.matchMedia('(min-width: 1100px)').matches }, h('summary', null, 'Outline ', this.count), h('p', { class: 'hint outline-keys' }, 'Keys: ', h('kbd', null, 'j'), ' next step, ', h('kbd', null, 'k'), ' previous'), h('nav', { 'aria-label': 'Outline of the conversation' }, this.list));
  }

  /** Redraws on the next frame (once however many pages or events arrived). */
  update(): void {
    if (this.frame || this.shown === this.rows.outline.length) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.draw();
    });
  }

  private draw(): void {
    const entries = this.rows.outline;
    this.shown = entries.length;
    this.count.textContent = `(${entries.length.toLocaleString()})`;
    const visible = entries.slice(-SHOWN);
    replace(
      this.list,
      entries.length > SHOWN ? h('li', { class: 'hint' }, `The newest ${SHOWN} of ${entries.length.toLocaleString()}`) : null,
      entries.length === 0 ? h('li', { class: 'hint' }, 'No messages, errors or file edits yet.') : null,
      visible.map((entry) =>
        h(
          'li',
          { 'data-type': entry.type },
          h(
            'button',
            { type: 'button', class: 'outline-entry', 'data-seq': entry.seq, onclick: () => this.jump(entry.seq) },
            h('span', { class: 'outline-sign', 'aria-hidden': 'true' }, SIGNS[entry.type]),
            h('span', { class: 'visually-hidden' }, `${WORDS[entry.type]}: `),
            h('span', { class: 'outline-label' }, entry.label || `#${entry.seq}`),
          ),
        ),
      ),
    );
  }
}
