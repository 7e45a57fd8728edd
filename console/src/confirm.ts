import { h, replace } from './dom.ts';

/**
 * A destructive action in a table row: the first click asks ("Confirm suspend", Cancel beside it),
 * the second acts; a failure is shown beside the button, in the row, not elsewhere on the page.
 * No browser dialog, so keyboard and screen-reader users get the same two steps.
 */
export function confirmedAction(options: { label: string; confirm: string; target: string; danger?: boolean; act: () => Promise<string | undefined> }): HTMLElement {
  const holder = h('span', { class: 'row-action' });
  const problem = h('span', { class: 'row-error', role: 'alert' });
  const idle = () => {
    const button = h('button', { type: 'button', class: `btn small${options.danger === false ? '' : ' danger'}` }, options.label, h('span', { class: 'visually-hidden' }, ` ${options.target}`));
    button.addEventListener('click', asking);
    replace(holder, button, problem);
    return button;
  };
  const asking = () => {
    const confirm = h('button', { type: 'button', class: 'btn small danger confirm' }, options.confirm, h('span', { class: 'visually-hidden' }, ` ${options.target}`));
    const cancel = h('button', { type: 'button', class: 'btn small quiet' }, 'Cancel');
    cancel.addEventListener('click', () => idle().focus());
    confirm.addEventListener('click', async () => {
      confirm.disabled = true;
      const error = await options.act();
      if (error === undefined) return;
      idle();
      problem.textContent = error;
    });
    replace(holder, confirm, cancel, problem);
    confirm.focus();
  };
  idle();
  return holder;
}
