import fs from 'node:fs';
import { expect } from 'chai';
import fc from 'fast-check';
import { eventText, foldText, indexVector, isUnspaced, plainText, quoteLexeme } from '../../src/search/text.ts';

/**
 * The indexer's fast tokenizer (one pass over character codes for ASCII words) makes exactly the
 * tsvector literal the first, regex-based implementation made (kept here as the reference), so what
 * is searchable did not change when indexing got cheaper.
 */

const UNSPACED_CLASS = String.raw`\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}\p{Script=Thai}\p{Script=Lao}\p{Script=Khmer}\p{Script=Myanmar}`;
const UNSPACED = new RegExp(`[${UNSPACED_CLASS}]`, 'u');
const UNSPACED_RUNS = new RegExp(`[${UNSPACED_CLASS}][${UNSPACED_CLASS}\\p{M}]*|[^${UNSPACED_CLASS}]+`, 'gu');
const WORD = /[\p{L}\p{M}\p{N}]+/gu;
const ASCII = /^[\x00-\x7f]*$/;
const ASCII_WORD = /[A-Za-z0-9]+/g;
const SUBWORD_BOUNDARY = /(?<=\p{Ll})(?=\p{Lu})|(?<=\p{Lu})(?=\p{Lu}\p{Ll})|(?<=\p{L})(?=\p{N})|(?<=\p{N})(?=\p{L})/u;
const ASCII_SUBWORD = /[a-z][A-Z]|[A-Z][A-Z][a-z]|[A-Za-z][0-9]|[0-9][A-Za-z]/;
const cut = (lexeme: string) => (lexeme.length > 100 ? Array.from(lexeme).slice(0, 100).join('') : lexeme);

function referencePlaceWord(folded: string, at: number, put: (lexeme: string, position: number) => void): number {
  if (!isUnspaced(folded)) {
    put(cut(folded), at);
    return 1;
  }
  let used = 0;
  for (const run of folded.match(UNSPACED_RUNS) ?? []) {
    if (!UNSPACED.test(run)) {
      put(cut(run), at + used++);
      continue;
    }
    const chars = Array.from(run);
    chars.forEach((c, i) => {
      put(c, at + used + i);
      if (i + 1 < chars.length) put(c + chars[i + 1]!, at + used + i);
    });
    used += chars.length;
  }
  return used;
}

/** indexVector as first written (commit eb532c2). */
function referenceIndexVector(text: string): string {
  const positions = new Map<string, number[]>();
  const put = (lexeme: string, position: number) => {
    if (position > 16_383) return;
    const list = positions.get(lexeme);
    if (list === undefined) positions.set(lexeme, [position]);
    else if (list.length < 256 && list[list.length - 1] !== position) list.push(position);
  };
  let at = 1;
  const ascii = ASCII.test(text);
  for (const [word] of text.matchAll(ascii ? ASCII_WORD : WORD)) {
    if (at > 16_383) break;
    const folded = ascii ? word.toLowerCase() : foldText(word);
    if (ascii ? ASCII_SUBWORD.test(word) : SUBWORD_BOUNDARY.test(word) && !isUnspaced(folded)) {
      const parts = word.split(SUBWORD_BOUNDARY);
      parts.forEach((part, i) => {
        put(cut(foldText(part)), at + i);
        put(cut(folded), at + i);
      });
      at += parts.length;
    } else if (ascii) {
      put(cut(folded), at++);
    } else {
      at += referencePlaceWord(folded, at, put);
    }
  }
  let vector = '';
  for (const [lexeme, list] of positions) vector += `${vector === '' ? '' : ' '}${quoteLexeme(lexeme)}:${list.join(',')}`;
  return vector;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const referencePlainText = (value: string) => value.replace(LONE_SURROGATE, '\uFFFD').replace(/[\s\u0000]+/g, ' ');

/** Pieces text is made of: identifiers, numbers, punctuation, accents, CJK, Thai, combining marks, emoji, lone surrogates. */
const PIECES = [
  'parseDuration', 'HTTPServer', 'utf8', 'v2Beta', 'ECONNRESET', 'src/utils/timeutil.py', 'x86_64', 'A1b2C3', 'aB', 'ABc', 'Ab1',
  'the', ' ', '  ', '\n', '\t', '.', '-', "'", '\\', '"', ':', ',', '0', '42', '1024', 'ÉCOLE', 'café', 'Straße', 'İstanbul',
  'ΟΔΥΣΣΕΥΣ', 'ошибкаОшибка', 'Ошибка2', '東京都', 'データベース', '한국어', 'ภาษาไทย', 'e\u0301', '\u0301', 'ﬁle', 'ＡＢＣ', '①',
  '⑴', '😀', '\uD800', '\uDC00', '𝒳𝒴', 'ǅungla', 'a\u0000b', '✓', '✗', 'ŉ', 'x'.repeat(120), 'é'.repeat(110), 'maxPositions',
];

describe('search text: the fast tokenizer matches the reference', () => {
  it('gives the reference tsvector literal for random text (fast-check, fixed seed)', () => {
    const piece = fc.oneof(fc.constantFrom(...PIECES), fc.string({ unit: 'grapheme', maxLength: 6 }), fc.string({ unit: 'binary', maxLength: 4 }), fc.string({ maxLength: 8 }));
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 40 }), (pieces) => {
        const text = pieces.join('');
        expect(indexVector(text)).to.equal(referenceIndexVector(text));
      }),
      { seed: 35, numRuns: 5_000 },
    );
  });

  it('gives the reference literal for the agent-server fixtures and for long text (position and per-lexeme limits)', () => {
    const dir = new URL('../fixtures/agent-server/', import.meta.url);
    const events = ['events.json', 'events-newer.json'].flatMap((file) => JSON.parse(fs.readFileSync(new URL(file, dir), 'utf8')) as Record<string, unknown>[]);
    for (const event of events) {
      const text = eventText(event);
      expect(indexVector(text), String(event.kind)).to.equal(referenceIndexVector(text));
    }
    const long = Array.from({ length: 9_000 }, (_, i) => `word${i % 300} parseDuration the ✓ ${i}`).join(' ');
    expect(indexVector(long)).to.equal(referenceIndexVector(long));
    const ascii = Array.from({ length: 9_000 }, (_, i) => `the HTTPServer x${i}`).join(' ');
    expect(indexVector(ascii)).to.equal(referenceIndexVector(ascii));
  });

  it('keeps plainText: lone surrogates as U+FFFD, whitespace and NUL runs as one space', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 30 }), (value) => {
        expect(plainText(value)).to.equal(referencePlainText(value));
      }),
      { seed: 35, numRuns: 5_000 },
    );
    expect(plainText('a\uD800b \u0000\n c\uDC00')).to.equal('a\uFFFDb c\uFFFD');
  });
});
