import { h, sizeOf } from '../../dom.ts';

/** The parts of the cards that several families share: output blocks, argument tables, raw JSON. */

export type Fields = Record<string, unknown>;

/** Terminal output longer than this many lines is folded. */
export const FOLD_LINES = 30;
/** Output beyond this many characters is shown only on request. */
const OUTPUT_LIMIT = 100_000;

type Content = { type?: string; text?: string; image_urls?: string[] };

/** The text of a list of content blocks (text blocks joined; images named). */
export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return (content as Content[])
    .map((block) => (block.type === 'image' ? `[${block.image_urls?.length ?? 0} image(s)]` : (block.text ?? '')))
    .filter(Boolean)
    .join('\n\n');
}

export function str(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

export function stringify(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  return JSON.stringify(value, null, 2);
}

export function withoutKind(fields: Fields): Fields {
  const { kind: _kind, ...rest } = fields;
  return rest;
}

/** Whether an observation reports a failure: `is_error`, or a non-zero exit code (-1 means "unknown"). */
export function failed(observation: Fields): boolean {
  return Boolean(observation.is_error) || (typeof observation.exit_code === 'number' && observation.exit_code !== 0 && observation.exit_code !== -1);
}

/** Terminal-like output: monospace, folded past `FOLD_LINES` lines, errors marked. */
export function output(text: string, isError: boolean, label = isError ? 'error' : 'output'): HTMLElement {
  const block = h('div', { class: `output-block${isError ? ' failed' : ''}` });
  block.append(h('p', { class: 'output-label' }, isError ? h('span', { class: 'bad' }, `✕ ${label}`) : label));
  const limited = text.length > OUTPUT_LIMIT ? text.slice(0, OUTPUT_LIMIT) : text;
  const pre = h('pre', { class: 'output', tabindex: 0 }, limited);
  let lines = 1;
  for (let i = limited.indexOf('\n'); i >= 0 && lines <= FOLD_LINES; i = limited.indexOf('\n', i + 1)) lines++;
  if (lines > FOLD_LINES) {
    pre.classList.add('folded-output');
    const toggle = h('button', { type: 'button', class: 'btn small', 'aria-expanded': 'false' }, 'Show all output');
    toggle.addEventListener('click', () => {
      const folded = pre.classList.toggle('folded-output');
      toggle.setAttribute('aria-expanded', String(!folded));
      toggle.textContent = folded ? 'Show all output' : 'Fold output';
    });
    block.append(pre, toggle);
  } else block.append(pre);
  if (limited.length < text.length) {
    const more = h('button', { type: 'button', class: 'btn small' }, `Show the whole output (${sizeOf(text.length)})`);
    more.addEventListener('click', () => {
      pre.textContent = text;
      more.remove();
    });
    block.append(more);
  }
  return block;
}

/** Arguments as a two-column table: strings as text (multi-line ones as a block), the rest as compact JSON. */
export function argumentsTable(fields: Fields, caption: string): HTMLElement {
  const entries = Object.entries(fields).filter(([, value]) => value !== null && value !== undefined);
  if (!entries.length) return h('p', { class: 'hint args-empty' }, 'No arguments');
  return h(
    'div',
    { class: 'table-wrap args-wrap' },
    h(
      'table',
      { class: 'args' },
      h('caption', { class: 'visually-hidden' }, caption),
      h(
        'tbody',
        null,
        entries.map(([name, value]) => {
          const text = typeof value === 'string' ? value : JSON.stringify(value, null, typeof value === 'object' ? 2 : undefined);
          return h('tr', null, h('th', { scope: 'row' }, name), h('td', null, text.includes('\n') ? h('pre', { class: 'arguments', tabindex: 0 }, text) : h('code', null, text)));
        }),
      ),
    ),
  );
}

/** An unknown class or tool: its JSON, folded, as text (never markup). */
export function rawJson(label: string, value: unknown): HTMLElement {
  return h('details', { class: 'raw-json', 'data-card': 'raw' }, h('summary', null, label), h('pre', { class: 'raw', tabindex: 0 }, stringify(value)));
}

/** `1.2 s`, `3 min 5 s`, `2 h 4 min`. */
export function duration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  const seconds = ms / 1000;
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 1 : 0)} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${Math.round(seconds % 60)} s`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}
