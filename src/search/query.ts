import { InvalidInputError } from '../errors.ts';
import { foldText, isUnspaced, queryLexemes, type QueryLexeme } from './text.ts';

/**
 * The search syntax (docs/search.md, "Query syntax"): words that must all match, `"a phrase"`,
 * `-excluded`, a prefix `pars*`, and terms with punctuation (`timeutil.py`, `parse_duration`) matched
 * as written. Case, accents and full-width forms do not matter.
 */

/** One term of a query, folded. */
export interface SearchTerm {
  /** `-term`: the event must not match it. */
  excluded: boolean;
  /** `term*`: its last lexeme is a prefix. */
  prefix: boolean;
  /** The lexemes the index must hold, each at its distance from the previous one (a phrase when several). */
  lexemes: QueryLexeme[];
  /** Several lexemes or an unspaced script: the term's folded text, found as a sequence (for highlights). */
  sequence: string | null;
}

export interface SearchQuery {
  /** The query as given, for cursors. */
  text: string;
  terms: SearchTerm[];
}

/** Terms in one query at most. */
export const MAX_TERMS = 16;

function invalid(message: string, q: string): InvalidInputError {
  return new InvalidInputError(`Invalid search query: ${message}`, ['query', 'q'], 'value_error', q);
}

/** Parses `q` (a 422 naming `q` when it cannot be parsed). */
export function parseSearchQuery(q: string): SearchQuery {
  const terms: SearchTerm[] = [];
  let at = 0;
  while (at < q.length) {
    if (/\s/.test(q[at]!)) {
      at++;
      continue;
    }
    let excluded = false;
    if (q[at] === '-' && at + 1 < q.length && !/\s/.test(q[at + 1]!)) {
      excluded = true;
      at++;
    }
    let raw: string;
    let prefix = false;
    if (q[at] === '"') {
      const close = q.indexOf('"', at + 1);
      if (close < 0) throw invalid('a quote is not closed', q);
      raw = q.slice(at + 1, close);
      at = close + 1;
      if (at < q.length && !/\s/.test(q[at]!)) throw invalid('a phrase must be followed by a space', q);
    } else {
      const end = q.slice(at).search(/\s/);
      raw = end < 0 ? q.slice(at) : q.slice(at, at + end);
      at += raw.length;
      if (raw.includes('"')) throw invalid(`a quote inside a word (${raw})`, q);
      if (raw.endsWith('*')) {
        prefix = true;
        raw = raw.slice(0, -1);
      }
      if (raw.includes('*')) throw invalid(`* may only end a word (${prefix ? `${raw}*` : raw})`, q);
    }
    terms.push(termOf(raw, excluded, prefix, q));
  }
  if (terms.length === 0) throw invalid('nothing to search for', q);
  if (terms.length > MAX_TERMS) throw invalid(`more than ${MAX_TERMS} terms`, q);
  if (terms.every((term) => term.excluded)) throw invalid('at least one term must not be excluded', q);
  return { text: q, terms };
}

function termOf(raw: string, excluded: boolean, prefix: boolean, q: string): SearchTerm {
  const folded = foldText(raw).replace(/\s+/g, ' ').trim();
  const lexemes = queryLexemes(folded);
  if (lexemes.length === 0) throw invalid(`a term needs a letter or a digit (${raw || '""'})`, q);
  const single = lexemes.length === 1 && !isUnspaced(lexemes[0]!.lexeme);
  return { excluded, prefix: prefix && !isUnspaced(lexemes[lexemes.length - 1]!.lexeme), lexemes, sequence: single ? null : folded };
}
