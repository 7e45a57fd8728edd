import { structuredPatch } from 'diff';
import { h } from '../dom.ts';

/**
 * Unified diffs of file edits: computed with jsdiff (`structuredPatch`, Myers' algorithm), or read
 * from a patch the agent wrote, and drawn as lines with old and new line numbers. Added and removed
 * lines are coloured and also carry a `+` / `−` sign, so nothing depends on seeing colour. Only the
 * first lines are drawn until the reader asks for the rest, so a 5,000-line diff costs ~60 nodes.
 */

export interface DiffLine {
  readonly type: 'add' | 'del' | 'same' | 'hunk';
  readonly text: string;
  readonly oldNumber?: number;
  readonly newNumber?: number;
}

/** Lines drawn before the rest of a diff is folded. */
export const DIFF_FOLD_LINES = 40;
/** A diff that takes longer than this (ms) to compute is shown as "all removed, all added". */
const DIFF_TIMEOUT_MS = 50;

/** The unified diff (3 lines of context) between two texts; line numbers start at `firstLine`. */
export function diffLines(before: string, after: string, firstLine = 1): DiffLine[] {
  return tryDiffLines(before, after, firstLine) ?? [{ type: 'hunk', text: 'The whole text was replaced' }, ...linesOf(before, 'del', firstLine), ...linesOf(after, 'add', firstLine)];
}

/** The unified diff, or undefined when the texts share almost no line or the diff takes too long. */
export function tryDiffLines(before: string, after: string, firstLine = 1): DiffLine[] | undefined {
  if (sharesFewLines(before, after)) return undefined;
  const patch = structuredPatch('', '', before, after, undefined, undefined, { context: 3, timeout: DIFF_TIMEOUT_MS });
  if (!patch) return undefined;
  const lines: DiffLine[] = [];
  for (const hunk of patch.hunks) {
    let oldNumber = hunk.oldStart + firstLine - 1;
    let newNumber = hunk.newStart + firstLine - 1;
    lines.push({ type: 'hunk', text: `@@ -${oldNumber},${hunk.oldLines} +${newNumber},${hunk.newLines} @@` });
    for (const line of hunk.lines) {
      const sign = line[0];
      const text = line.slice(1);
      if (sign === '\\') continue; // "\ No newline at end of file"
      if (sign === '+') lines.push({ type: 'add', text, newNumber: newNumber++ });
      else if (sign === '-') lines.push({ type: 'del', text, oldNumber: oldNumber++ });
      else lines.push({ type: 'same', text, oldNumber: oldNumber++, newNumber: newNumber++ });
    }
  }
  return lines;
}

/**
 * Whether two long texts have almost no line in common: their diff is then "all removed, all added",
 * which Myers' algorithm (quadratic in the number of changes) would take long to find.
 */
function sharesFewLines(before: string, after: string): boolean {
  if (before.length + after.length < 20_000) return false;
  const seen = new Set(before.split('\n'));
  const lines = after.split('\n');
  let common = 0;
  for (const line of lines) if (seen.has(line)) common++;
  return common < Math.min(seen.size, lines.length) / 10;
}

/** Every line of `text` as added (a new file) or removed. */
export function linesOf(text: string, type: 'add' | 'del', firstLine = 1): DiffLine[] {
  if (text === '') return [];
  const lines = text.endsWith('\n') ? text.slice(0, -1).split('\n') : text.split('\n');
  return lines.map((line, i) => (type === 'add' ? { type, text: line, newNumber: firstLine + i } : { type, text: line, oldNumber: firstLine + i }));
}

export interface PatchFile {
  readonly path: string;
  readonly operation: string;
  readonly lines: DiffLine[];
}

/**
 * The files and lines of a patch: the `*** Begin Patch` format of `apply_patch` (`*** Update File:`,
 * `@@ context`, `+`/`-`/` ` lines) or a unified diff (`--- a/…`, `+++ b/…`, `@@ -1,2 +1,3 @@`, which
 * gives line numbers).
 */
export function parsePatch(patch: string): PatchFile[] {
  const files: PatchFile[] = [];
  let current: { path: string; operation: string; lines: DiffLine[] } | undefined;
  let oldNumber: number | undefined;
  let newNumber: number | undefined;
  const open = (path: string, operation: string) => {
    current = { path, operation, lines: [] };
    files.push(current);
    oldNumber = newNumber = undefined;
  };
  for (const line of patch.split('\n')) {
    const header = /^\*\*\* (Update|Add|Delete) File: (.*)$/.exec(line);
    if (header) {
      open(header[2]!.trim(), header[1]!.toLowerCase());
      continue;
    }
    if (line.startsWith('*** Move to: ') && current) {
      current.path = `${current.path} → ${line.slice(13).trim()}`;
      continue;
    }
    if (line.startsWith('*** ') || line.startsWith('diff --git ') || line.startsWith('index ')) continue;
    if (line.startsWith('--- ')) {
      open(line.slice(4).replace(/^a\//, '').trim(), 'update');
      continue;
    }
    if (line.startsWith('+++ ') && current && current.lines.length === 0) {
      const target = line.slice(4).replace(/^b\//, '').trim();
      if (target !== '/dev/null') current.path = target;
      continue;
    }
    if (!current) open('', 'update');
    if (line.startsWith('@@')) {
      const numbers = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(line);
      oldNumber = numbers ? Number(numbers[1]) : undefined;
      newNumber = numbers ? Number(numbers[2]) : undefined;
      current!.lines.push({ type: 'hunk', text: line });
    } else if (line.startsWith('+')) current!.lines.push({ type: 'add', text: line.slice(1), newNumber: newNumber === undefined ? undefined : newNumber++ });
    else if (line.startsWith('-')) current!.lines.push({ type: 'del', text: line.slice(1), oldNumber: oldNumber === undefined ? undefined : oldNumber++ });
    else if (line.startsWith(' ')) current!.lines.push({ type: 'same', text: line.slice(1), oldNumber: oldNumber === undefined ? undefined : oldNumber++, newNumber: newNumber === undefined ? undefined : newNumber++ });
  }
  return files.filter((file) => file.path || file.lines.length);
}

const SIGNS = { add: '+', del: '−', same: ' ', hunk: '' } as const;
const SPOKEN = { add: 'added', del: 'removed', same: '', hunk: '' } as const;

/** The diff as a block of numbered lines; beyond `DIFF_FOLD_LINES`, a button shows the rest. */
export function renderDiff(lines: DiffLine[], label: string): HTMLElement {
  const added = lines.filter((line) => line.type === 'add').length;
  const removed = lines.filter((line) => line.type === 'del').length;
  const body = h('div', { class: 'diff-lines' });
  const block = h(
    'div',
    { class: 'diff', role: 'group', 'aria-label': label },
    h('p', { class: 'diff-stat' }, h('span', { class: 'diff-added' }, `+${added}`), ' ', h('span', { class: 'diff-removed' }, `−${removed}`), h('span', { class: 'visually-hidden' }, ` (${added} line${added === 1 ? '' : 's'} added, ${removed} removed)`)),
    h('div', { class: 'diff-scroll', tabindex: 0, role: 'region', 'aria-label': `${label}: lines` }, body),
  );
  appendLines(body, lines, 0, Math.min(lines.length, DIFF_FOLD_LINES));
  if (lines.length > DIFF_FOLD_LINES) {
    const rest = lines.length - DIFF_FOLD_LINES;
    const more = h('button', { type: 'button', class: 'btn small diff-more', 'aria-expanded': 'false' }, `Show ${rest.toLocaleString()} more line${rest === 1 ? '' : 's'}`);
    more.addEventListener('click', () => {
      appendLines(body, lines, DIFF_FOLD_LINES, lines.length);
      more.remove();
    });
    block.append(more);
  }
  return block;
}

function appendLines(body: HTMLElement, lines: DiffLine[], from: number, to: number): void {
  const fragment = document.createDocumentFragment();
  for (let i = from; i < to; i++) {
    const line = lines[i]!;
    if (line.type === 'hunk') {
      fragment.append(h('div', { class: 'diff-line hunk' }, h('span', { class: 'diff-text' }, line.text)));
      continue;
    }
    fragment.append(
      h(
        'div',
        { class: `diff-line ${line.type}` },
        h('span', { class: 'ln', 'aria-hidden': 'true' }, line.oldNumber ?? ''),
        h('span', { class: 'ln', 'aria-hidden': 'true' }, line.newNumber ?? ''),
        h('span', { class: 'sign' }, SIGNS[line.type], SPOKEN[line.type] ? h('span', { class: 'visually-hidden' }, ` ${SPOKEN[line.type]}: `) : null),
        h('span', { class: 'diff-text' }, line.text),
      ),
    );
  }
  body.append(fragment);
}
