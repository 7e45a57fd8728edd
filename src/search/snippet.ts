import type { SearchQuery } from './query.ts';
import { foldCodePoint, foldText, WORD } from './text.ts';

/** A piece of an event's searchable text around its first match; highlights as [start, end) code point offsets into `text`. */
export interface Snippet {
  text: string;
  highlights: [number, number][];
}

/** Code points of a snippet, at most. */
export const SNIPPET_LENGTH = 200;
/** Code points shown before the first match. */
const LEAD = 60;

const SUBWORDS = /\p{Lu}?\p{Ll}+|\p{Lu}+(?!\p{Ll})|\p{Lt}\p{Ll}*|\p{Lo}+|\p{N}+|[\p{L}\p{M}]+/gu;

/** The text folded, with the code point of the original each folded UTF-16 unit comes from. */
function foldedWithMap(points: string[]): { folded: string; origin: number[] } {
  let folded = '';
  const origin: number[] = [];
  points.forEach((c, i) => {
    const f = foldCodePoint(c);
    folded += f;
    for (let k = 0; k < f.length; k++) origin.push(i);
  });
  origin.push(points.length);
  return { folded, origin };
}

/** Where each term of the query (not the excluded ones) occurs in `text`, as code point ranges. */
export function matchRanges(text: string, query: SearchQuery): [number, number][] {
  const points = Array.from(text);
  const { folded, origin } = foldedWithMap(points);
  const ranges: [number, number][] = [];
  const unitToPoint = unitIndex(text);
  for (const term of query.terms) {
    if (term.excluded) continue;
    // A sequence (a phrase, an identifier, an unspaced script): its words in order, any separators between them.
    if (term.sequence !== null) {
      for (const match of folded.matchAll(sequencePattern(term.sequence))) {
        ranges.push([origin[match.index]!, origin[match.index + match[0].length - 1]! + 1]);
      }
      continue;
    }
    const wanted = term.lexemes[0]!.lexeme;
    for (const word of text.matchAll(WORD)) {
      const start = unitToPoint[word.index]!;
      const candidates: [number, string][] = [[0, word[0]]];
      for (const part of word[0].matchAll(SUBWORDS)) if (part[0] !== word[0]) candidates.push([part.index, part[0]]);
      for (const [offset, piece] of candidates) {
        const f = foldText(piece);
        if (term.prefix ? f.startsWith(wanted) : f === wanted) {
          const from = start + Array.from(word[0].slice(0, offset)).length;
          ranges.push([from, from + (term.prefix ? prefixPoints(piece, wanted) : Array.from(piece).length)]);
          break;
        }
      }
    }
  }
  return merge(ranges);
}

/** A folded term as a pattern: its words as written, each run of separators as any run of separators. */
function sequencePattern(sequence: string): RegExp {
  const parts = sequence.match(/[\p{L}\p{M}\p{N}]+/gu) ?? [];
  const escaped = parts.map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp(escaped.join('[^\\p{L}\\p{M}\\p{N}]+'), 'gu');
}

/** How many code points of `piece` fold to the prefix `wanted`. */
function prefixPoints(piece: string, wanted: string): number {
  let folded = '';
  let count = 0;
  for (const c of piece) {
    if (folded.length >= wanted.length) break;
    folded += foldCodePoint(c);
    count++;
  }
  return count;
}

/** For each UTF-16 unit of `text`, the index of its code point. */
function unitIndex(text: string): number[] {
  const index: number[] = [];
  let point = 0;
  for (const c of text) {
    for (let k = 0; k < c.length; k++) index.push(point);
    point++;
  }
  index.push(point);
  return index;
}

function merge(ranges: [number, number][]): [number, number][] {
  ranges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const merged: [number, number][] = [];
  for (const range of ranges) {
    const last = merged[merged.length - 1];
    if (last && range[0] <= last[1]) last[1] = Math.max(last[1], range[1]);
    else merged.push([range[0], range[1]]);
  }
  return merged;
}

/** The snippet of `text` for `query`: SNIPPET_LENGTH code points around the first match, with every match in it. */
export function snippetOf(text: string, query: SearchQuery): Snippet {
  const points = Array.from(text);
  const ranges = matchRanges(text, query);
  const first = ranges[0]?.[0] ?? 0;
  let start = Math.max(0, first - LEAD);
  const end = Math.min(points.length, start + SNIPPET_LENGTH);
  start = Math.max(0, Math.min(start, end - SNIPPET_LENGTH));
  const before = start > 0 ? '…' : '';
  const after = end < points.length ? '…' : '';
  const shift = before.length - start;
  const highlights = ranges
    .filter(([from, to]) => from < end && to > start)
    .map(([from, to]): [number, number] => [Math.max(from, start) + shift, Math.min(to, end) + shift]);
  return { text: before + points.slice(start, end).join('') + after, highlights };
}
