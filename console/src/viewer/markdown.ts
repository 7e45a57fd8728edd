import { h, sizeOf } from '../dom.ts';

/**
 * A small Markdown subset rendered straight to DOM nodes: paragraphs, headings, lists, quotes,
 * fenced code, `code`, **bold**, *italics* and [links](https://…). Agent output is hostile input,
 * so no markup is ever parsed from it: every piece of text becomes a text node, links keep only
 * http(s) and mailto addresses, and images are shown as links, never loaded. The scanners are
 * linear (no backtracking regular expressions), and text beyond `limit` characters is folded behind
 * a button, so a megabyte-long line renders at once.
 */

const SAFE_PROTOCOLS = new Set(['http:', 'https:', 'mailto:']);
export const DEFAULT_LIMIT = 20_000;

/** Renders `text` as Markdown into a fragment. */
export function renderMarkdown(text: string, limit = DEFAULT_LIMIT): DocumentFragment {
  const fragment = document.createDocumentFragment();
  const shown = text.length > limit ? text.slice(0, limit) : text;
  renderBlocks(fragment, shown);
  if (shown.length < text.length) fragment.append(foldedRest(text));
  return fragment;
}

/** Text shown in full on request up to this size; beyond it, offered as a download. */
const SHOW_LIMIT = 200_000;

/**
 * The rest of a long text: a button that shows the whole text as plain, unwrapped text, or, beyond
 * what a browser lays out quickly, a link that downloads it as a file.
 */
function foldedRest(text: string): HTMLElement {
  const holder = h('div', { class: 'folded' });
  holder.append(h('span', { class: 'hint' }, `Shortened: the first ${sizeOf(DEFAULT_LIMIT)} of ${sizeOf(text.length)} are shown. `));
  if (text.length <= SHOW_LIMIT) {
    const button = h('button', { type: 'button', class: 'btn small' }, `Show the whole message (${sizeOf(text.length)})`);
    button.addEventListener('click', () => holder.replaceChildren(h('pre', { class: 'raw', tabindex: 0 }, text)));
    holder.append(button);
  } else {
    const link = h('a', { class: 'btn small', download: 'message.txt', href: '#' }, `Download the whole message (${sizeOf(text.length)})`);
    // The file is made when asked for, and its object URL let go of once the download has started.
    link.addEventListener('click', () => {
      const url = URL.createObjectURL(new Blob([text], { type: 'text/plain;charset=utf-8' }));
      link.href = url;
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    });
    holder.append(link);
  }
  return holder;
}

function renderBlocks(parent: Node, text: string): void {
  const lines = text.split('\n');
  let paragraph: string[] = [];
  let list: HTMLElement | undefined;
  const flush = () => {
    if (paragraph.length) parent.appendChild(inline(h('p'), paragraph.join('\n')));
    paragraph = [];
    list = undefined;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const trimmed = line.trimStart();
    if (trimmed.startsWith('```') || trimmed.startsWith('~~~')) {
      flush();
      const fence = trimmed.slice(0, 3);
      const language = trimmed.slice(3).trim();
      const code: string[] = [];
      while (++i < lines.length && !lines[i]!.trimStart().startsWith(fence)) code.push(lines[i]!);
      parent.appendChild(h('pre', { class: 'code', tabindex: 0, 'data-language': language || null }, h('code', null, code.join('\n'))));
      continue;
    }
    if (trimmed === '') {
      flush();
      continue;
    }
    const heading = headingLevel(trimmed);
    if (heading) {
      flush();
      parent.appendChild(inline(h('p', { class: `md-heading md-h${heading}` }), trimmed.slice(heading + 1).trim()));
      continue;
    }
    if (trimmed.startsWith('>')) {
      flush();
      const quoted: string[] = [];
      for (; i < lines.length && lines[i]!.trimStart().startsWith('>'); i++) quoted.push(lines[i]!.trimStart().slice(1).replace(/^ /, ''));
      i--;
      const quote = h('blockquote');
      renderBlocks(quote, quoted.join('\n'));
      parent.appendChild(quote);
      continue;
    }
    const item = listItem(trimmed);
    if (item) {
      if (paragraph.length) flush();
      if (!list || list.tagName.toLowerCase() !== item.tag) {
        list = h(item.tag);
        parent.appendChild(list);
      }
      list.appendChild(inline(h('li'), item.text));
      continue;
    }
    if (list && /^\s/.test(line)) {
      // A continuation line of the last list item.
      const last = list.lastElementChild!;
      last.append('\n');
      inline(last as HTMLElement, trimmed);
      continue;
    }
    list = undefined;
    paragraph.push(line);
  }
  flush();
}

function headingLevel(line: string): number {
  let level = 0;
  while (level < line.length && level < 7 && line[level] === '#') level++;
  return level >= 1 && level <= 6 && line[level] === ' ' ? level : 0;
}

function listItem(line: string): { tag: 'ul' | 'ol'; text: string } | undefined {
  if ((line[0] === '-' || line[0] === '*' || line[0] === '+') && line[1] === ' ') return { tag: 'ul', text: line.slice(2) };
  let digits = 0;
  while (digits < line.length && digits < 9 && line[digits]! >= '0' && line[digits]! <= '9') digits++;
  if (digits > 0 && (line[digits] === '.' || line[digits] === ')') && line[digits + 1] === ' ') return { tag: 'ol', text: line.slice(digits + 2) };
  return undefined;
}

/** Inline spans, scanned left to right once: `code`, **strong**, *em* / _em_, [text](url), ![alt](url). */
export function inline(parent: HTMLElement, text: string): HTMLElement {
  // The next position of each delimiter, remembered: a text full of unclosed delimiters stays linear.
  const found = new Map<string, number>();
  const next = (pattern: string, from: number): number => {
    const cached = found.get(pattern);
    if (cached !== undefined && (cached === -1 || cached >= from)) return cached;
    const index = text.indexOf(pattern, from);
    found.set(pattern, index);
    return index;
  };
  const oneLine = (from: number, to: number) => {
    const newline = next('\n', from);
    return newline === -1 || newline > to;
  };
  let plain = '';
  const emit = () => {
    if (plain) parent.appendChild(document.createTextNode(plain));
    plain = '';
  };
  let i = 0;
  while (i < text.length) {
    const char = text[i]!;
    if (char === '`') {
      const end = next('`', i + 1);
      if (end > i + 1 && oneLine(i, end)) {
        emit();
        parent.appendChild(h('code', null, text.slice(i + 1, end)));
        i = end + 1;
        continue;
      }
    } else if ((char === '*' || char === '_') && text[i + 1] === char) {
      const end = next(char + char, i + 2);
      if (end > i + 2) {
        emit();
        parent.appendChild(inline(h('strong'), text.slice(i + 2, end)));
        i = end + 2;
        continue;
      }
    } else if ((char === '*' || char === '_') && text[i + 1] !== ' ' && (i === 0 || text[i - 1] === ' ' || text[i - 1] === '(' || text[i - 1] === '\n')) {
      const end = next(char, i + 1);
      if (end > i + 1 && text[end - 1] !== ' ' && oneLine(i, end)) {
        emit();
        parent.appendChild(inline(h('em'), text.slice(i + 1, end)));
        i = end + 1;
        continue;
      }
    } else if (char === '[' || (char === '!' && text[i + 1] === '[')) {
      const open = char === '!' ? i + 1 : i;
      const close = next('](', open + 1);
      const nextOpen = next('[', open + 1);
      const end = close > 0 ? next(')', close + 2) : -1;
      if (close > open && (nextOpen < 0 || nextOpen > close) && end > close && oneLine(open, end)) {
        emit();
        parent.appendChild(link(text.slice(open + 1, close), text.slice(close + 2, end).trim(), char === '!'));
        i = end + 1;
        continue;
      }
    }
    plain += char;
    i++;
  }
  emit();
  return parent;
}

/** A link only to http(s) or mailto addresses; anything else (javascript:, data:…) stays text. */
function link(label: string, target: string, image: boolean): Node {
  const shown = image ? `image: ${label || target}` : label || target;
  const safe = safeUrl(target);
  if (!safe) return h('span', { class: 'unsafe-link', title: 'Link removed: only http, https and mailto links are followed' }, shown);
  return h('a', { href: safe, rel: 'noopener noreferrer nofollow', target: '_blank', referrerpolicy: 'no-referrer' }, shown);
}

/** The address when it is an absolute http(s) or mailto URL, else undefined. */
export function safeUrl(target: string): string | undefined {
  try {
    const url = new URL(target);
    return SAFE_PROTOCOLS.has(url.protocol) ? url.href : undefined;
  } catch {
    return undefined;
  }
}
