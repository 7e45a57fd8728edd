import { holdsSecret } from '../secret-keys.ts';

/**
 * What an event gives to search: text taken from its own fields (never its raw JSON), folded the same
 * way for the index, the query and the highlights. The rules are listed in docs/search.md, "What is
 * searchable"; this file is their one implementation.
 */

/** Characters of searchable text one event gives at most. */
export const EVENT_TEXT_LIMIT = 32_768;
/** Characters one field gives at most (a message, a command, a path, one argument…). */
export const FIELD_TEXT_LIMIT = 8_192;
/** An observation's output: its first and last characters (an error and a summary tend to be at the end). */
export const OUTPUT_HEAD_CHARS = 12_288;
export const OUTPUT_TAIL_CHARS = 4_096;
/** Lexemes longer than this are cut (a hash, a base64 blob): the same cut on both sides keeps them findable. */
const LEXEME_LIMIT = 100;

const FIELD_SEPARATOR = ' · ';

/** Keys whose values are never text to search: ids, encrypted or binary data, the discriminator. */
const SKIPPED_KEYS = new Set([
  'kind', 'encrypted_content', 'signature', 'data', 'image_urls', 'screenshot_data', 'id', 'tool_call_id',
  'action_id', 'llm_response_id', 'responses_item_id', 'parent_id', 'message_id', 'timestamp', 'cache_prompt',
  'type', 'origin', 'security_risk', 'metadata', 'prompt_token_ids', 'response_token_ids', 'forgotten_event_ids',
]);

/** Collects an event's fields within the per-field and per-event bounds. */
class TextCollector {
  private readonly parts: string[] = [];
  private remaining = EVENT_TEXT_LIMIT;

  add(value: unknown, limit = FIELD_TEXT_LIMIT): void {
    if (typeof value !== 'string' || this.remaining <= 0) return;
    const text = plainText(value).trim();
    if (text === '' || text.startsWith('data:')) return;
    const bounded = text.length > limit ? text.slice(0, limit) : text;
    const taken = bounded.length > this.remaining ? bounded.slice(0, this.remaining) : bounded;
    this.parts.push(taken);
    this.remaining -= taken.length + FIELD_SEPARATOR.length;
  }

  /** Output of a command or tool: its head and its tail. */
  addOutput(value: unknown): void {
    if (typeof value !== 'string') return;
    if (value.length <= OUTPUT_HEAD_CHARS + OUTPUT_TAIL_CHARS) return this.add(value, OUTPUT_HEAD_CHARS + OUTPUT_TAIL_CHARS);
    this.add(`${value.slice(0, OUTPUT_HEAD_CHARS)} … ${value.slice(-OUTPUT_TAIL_CHARS)}`, OUTPUT_HEAD_CHARS + OUTPUT_TAIL_CHARS + 3);
  }

  /** Every string of an open-ended payload (an action, an observation, tool arguments), secrets and ids aside. */
  addLeaves(value: unknown, depth = 0): void {
    if (depth > 8 || this.remaining <= 0) return;
    if (typeof value === 'string') return this.add(value);
    if (value === null || typeof value !== 'object') return;
    if (Array.isArray(value)) {
      for (const item of value) this.addLeaves(item, depth + 1);
      return;
    }
    for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
      if (SKIPPED_KEYS.has(key) || holdsSecret(key, item)) continue;
      if (key === 'text' || key === 'content' || key === 'output' || key === 'raw_output') this.addOutputLeaves(item);
      else this.addLeaves(item, depth + 1);
    }
  }

  private addOutputLeaves(value: unknown): void {
    if (typeof value === 'string') this.addOutput(value);
    else this.addLeaves(value, 1);
  }

  /** Tool-call arguments, a JSON string: its values, secrets aside; nothing when it is not JSON (a secret could hide in it). */
  addArguments(value: unknown): void {
    if (typeof value !== 'string') return;
    try {
      this.addLeaves(JSON.parse(value) as unknown);
    } catch {
      // Not JSON: left out rather than risk indexing a secret-looking key's value.
    }
  }

  addTexts(contents: unknown): void {
    if (!Array.isArray(contents)) return;
    for (const item of contents) if (item && typeof item === 'object') this.add((item as { text?: unknown }).text);
  }

  text(): string {
    return this.parts.join(FIELD_SEPARATOR);
  }
}

/** Text PostgreSQL and JSON both keep: no NUL, no lone surrogate, whitespace runs as one space. */
export function plainText(value: string): string {
  return (value as WellFormable).toWellFormed().replace(/[\s\u0000]+/g, ' ');
}

/** ES2024's String.prototype.toWellFormed (Node 20+): each lone surrogate becomes U+FFFD, natively. */
type WellFormable = string & { toWellFormed(): string };

type Fields = Record<string, unknown>;

const object = (value: unknown): Fields => (value && typeof value === 'object' && !Array.isArray(value) ? (value as Fields) : {});

function addReasoning(out: TextCollector, event: Fields): void {
  out.add(event.reasoning_content);
  if (Array.isArray(event.thinking_blocks)) for (const block of event.thinking_blocks) out.add(object(block).thinking);
  const item = object(event.responses_reasoning_item);
  // `summary` and `content` only: `encrypted_content` is never searchable.
  if (Array.isArray(item.summary)) for (const line of item.summary) out.add(line);
  if (Array.isArray(item.content)) for (const line of item.content) out.add(line);
}

function addToolCall(out: TextCollector, call: unknown): void {
  const fields = object(call);
  out.add(fields.name);
  out.addArguments(fields.arguments);
}

/** The searchable text of one event (parsed from its stored JSON), within EVENT_TEXT_LIMIT characters. */
export function eventText(event: Fields): string {
  const out = new TextCollector();
  switch (event.kind) {
    case 'MessageEvent': {
      const message = object(event.llm_message);
      out.addTexts(message.content);
      addReasoning(out, message);
      if (Array.isArray(message.tool_calls)) for (const call of message.tool_calls) addToolCall(out, call);
      out.addTexts(event.extended_content);
      if (Array.isArray(event.activated_skills)) for (const skill of event.activated_skills) out.add(skill);
      out.add(event.sender);
      out.add(object(event.critic_result).message);
      break;
    }
    case 'ActionEvent':
      out.addTexts(event.thought);
      out.add(event.summary);
      addReasoning(out, event);
      out.add(event.tool_name);
      out.addLeaves(event.action);
      out.addArguments(object(event.tool_call).arguments);
      out.add(object(event.critic_result).message);
      break;
    case 'ObservationEvent':
      out.add(event.tool_name);
      out.addLeaves(event.observation);
      out.addTexts(event.extended_content);
      break;
    case 'UserRejectObservation':
      out.add(event.tool_name);
      out.add(event.rejection_reason);
      break;
    case 'AgentErrorEvent':
      out.add(event.tool_name);
      out.add(event.error);
      break;
    case 'ServerErrorEvent':
    case 'ConversationErrorEvent':
      out.add(event.code);
      out.add(event.detail);
      break;
    case 'HookExecutionEvent':
      out.add(event.hook_command);
      out.add(event.tool_name);
      out.add(event.reason);
      out.add(event.error);
      out.addOutput(event.stdout);
      out.addOutput(event.stderr);
      out.add(event.additional_context);
      out.addLeaves(event.hook_input);
      break;
    case 'Condensation':
    case 'CondensationSummaryEvent':
      out.add(event.summary);
      break;
    case 'ACPToolCallEvent':
      out.add(event.title);
      out.add(event.tool_kind);
      out.addLeaves(event.raw_input);
      out.addLeaves({ raw_output: event.raw_output, content: event.content });
      break;
    case 'SystemPromptEvent':
      // The system prompt is the same boilerplate in every conversation: only what differs is searchable.
      out.add(object(event.dynamic_context).text);
      if (Array.isArray(event.tools)) for (const tool of event.tools) out.add(object(tool).title ?? object(tool).name);
      break;
    case 'LLMCompletionLogEvent':
      // `log_data` repeats the whole conversation at every call: its file and model only.
      out.add(event.filename);
      out.add(event.model_name);
      break;
    case 'ConversationStateUpdateEvent':
      out.add(event.key);
      out.add(event.value);
      break;
    case 'TokenEvent':
    case 'InterruptEvent':
    case 'PauseEvent':
    case 'CondensationRequest':
      break;
    default:
      // A kind stored under `accept-unknown`: its strings, secrets and ids aside.
      out.addLeaves(event);
  }
  return out.text();
}

const COMBINING_DIACRITICS = /[\u0300-\u036f]/g;
const foldCache = new Map<string, string>();
const ASCII = /^[\x00-\x7f]*$/;

/**
 * One code point folded for matching: compatibility forms (full-width, ligatures), Latin, Greek and
 * Cyrillic diacritics dropped, lower case, final sigma as sigma. Per code point, so offsets map back.
 */
export function foldCodePoint(c: string): string {
  const code = c.charCodeAt(0);
  if (code < 0x80) return code >= 65 && code <= 90 ? String.fromCharCode(code + 32) : c;
  let folded = foldCache.get(c);
  if (folded === undefined) {
    folded = c.normalize('NFKD').replace(COMBINING_DIACRITICS, '').normalize('NFC').toLowerCase().replace(/ς/g, 'σ');
    if (foldCache.size < 100_000) foldCache.set(c, folded);
  }
  return folded;
}

/** `text` folded for matching (see `foldCodePoint`). */
export function foldText(text: string): string {
  if (ASCII.test(text)) return text.toLowerCase();
  let folded = '';
  for (const c of text) folded += foldCodePoint(c);
  return folded;
}

/** Scripts written without spaces between words: matched by any substring (characters and pairs), not by words. */
const UNSPACED_CLASS = String.raw`\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}\p{Script=Thai}\p{Script=Lao}\p{Script=Khmer}\p{Script=Myanmar}`;
const UNSPACED = new RegExp(`[${UNSPACED_CLASS}]`, 'u');
const UNSPACED_RUNS = new RegExp(`[${UNSPACED_CLASS}][${UNSPACED_CLASS}\\p{M}]*|[^${UNSPACED_CLASS}]+`, 'gu');
/** A word: letters, combining marks and digits. */
export const WORD = /[\p{L}\p{M}\p{N}]+/gu;
/** Where an identifier splits into words: camelCase, HTTPServer, letters and digits. */
const SUBWORD_BOUNDARY = /(?<=\p{Ll})(?=\p{Lu})|(?<=\p{Lu})(?=\p{Lu}\p{Ll})|(?<=\p{L})(?=\p{N})|(?<=\p{N})(?=\p{L})/u;
/** PostgreSQL keeps positions up to 16,383 and 256 of them per lexeme. */
const MAX_POSITION = 16_383;
const MAX_POSITIONS_PER_LEXEME = 256;

export function isUnspaced(text: string): boolean {
  return !ASCII.test(text) && UNSPACED.test(text);
}

const cut = (lexeme: string) => (lexeme.length > LEXEME_LIMIT ? Array.from(lexeme).slice(0, LEXEME_LIMIT).join('') : lexeme);

/** A lexeme and its distance from the previous one of the same term (1: right after it). */
export interface QueryLexeme {
  lexeme: string;
  distance: number;
}

/**
 * The positions of a folded word's lexemes, from `at`: the word itself, or, in an unspaced script,
 * each character at its position with the pair it starts. Calls `put` for each; returns the positions used.
 */
function placeWord(folded: string, at: number, put: (lexeme: string, position: number) => void): number {
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

/** An event's index lexemes, each with its positions in ascending order (as PostgreSQL keeps them: 256 at most, up to MAX_POSITION). */
export type IndexLexemes = Map<string, number[]>;

function lexemeCollector(lexemes: IndexLexemes): (lexeme: string, position: number) => void {
  return (lexeme, position) => {
    if (position > MAX_POSITION) return;
    const list = lexemes.get(lexeme);
    if (list === undefined) lexemes.set(lexeme, [position]);
    else if (list.length < MAX_POSITIONS_PER_LEXEME && list[list.length - 1] !== position) list.push(position);
  };
}

/** The tsvector literal of index lexemes (what `lexemes::tsvector` reads). */
function vectorLiteral(lexemes: IndexLexemes): string {
  const parts: string[] = [];
  for (const [lexeme, positions] of lexemes) parts.push(`${quoteLexeme(lexeme)}:${positions.join(',')}`);
  return parts.join(' ');
}

const LOWER = 1;
const UPPER = 2;
const DIGIT = 3;
/** The class of an ASCII letter or digit (0: not a word character; non-ASCII: -1). */
function asciiClass(code: number): number {
  if (code >= 97 && code <= 122) return LOWER;
  if (code >= 65 && code <= 90) return UPPER;
  if (code >= 48 && code <= 57) return DIGIT;
  return code < 0x80 ? 0 : -1;
}

const WORD_CHARACTER = /^[\p{L}\p{M}\p{N}]$/u;
const wordCharacters = new Map<number, boolean>();
/** Whether a non-ASCII code point belongs to a word (WORD), remembered. */
function isWordCodePoint(code: number): boolean {
  let word = wordCharacters.get(code);
  if (word === undefined) {
    word = WORD_CHARACTER.test(String.fromCodePoint(code));
    if (wordCharacters.size < 100_000) wordCharacters.set(code, word);
  }
  return word;
}

/** The index's tsvector of an event's text as a literal (see `indexLexemes`). */
export function indexVector(text: string): string {
  return vectorLiteral(indexLexemes(text));
}

/**
 * The index's tsvector of an event's text, with positions (for phrases): every folded word; the words
 * of an identifier (`parseDuration` → `parse` `duration`, the whole at each of their positions); the
 * characters and pairs of unspaced scripts. PostgreSQL takes them as they are (no parser, no
 * dictionary, no locale), so every database indexes every script alike.
 *
 * Words are WORD's matches; an ASCII word (most of agent output) is split and lower-cased from its
 * character codes in one pass, the others by the Unicode rules (SUBWORD_BOUNDARY, foldText, placeWord).
 */
export function indexLexemes(text: string): IndexLexemes {
  const lexemes: IndexLexemes = new Map();
  const put = lexemeCollector(lexemes);
  // Lower case of the whole text keeps its offsets only when it is ASCII.
  const lower = Buffer.byteLength(text) === text.length ? text.toLowerCase() : null;
  const lowerSlice = (from: number, to: number) => (lower === null ? text.slice(from, to).toLowerCase() : lower.slice(from, to));
  const boundaries: number[] = [];
  let at = 1;
  let i = 0;
  const n = text.length;
  while (i < n && at <= MAX_POSITION) {
    let kind = asciiClass(text.charCodeAt(i));
    if (kind === 0) {
      i++;
      continue;
    }
    if (kind < 0) {
      const code = text.codePointAt(i)!;
      if (!isWordCodePoint(code)) {
        i += code > 0xffff ? 2 : 1;
        continue;
      }
    }
    // One word: its ASCII subword boundaries on the way, unless a non-ASCII character makes it a Unicode word.
    const start = i;
    let ascii = true;
    let before = 0;
    let previous = 0;
    boundaries.length = 0;
    while (i < n) {
      kind = asciiClass(text.charCodeAt(i));
      if (kind === 0) break;
      if (kind < 0) {
        const code = text.codePointAt(i)!;
        if (!isWordCodePoint(code)) break;
        ascii = false;
        i += code > 0xffff ? 2 : 1;
        continue;
      }
      if (ascii && previous !== 0) {
        if ((previous === LOWER && kind === UPPER) || (previous !== DIGIT) === (kind === DIGIT)) boundaries.push(i);
        else if (before === UPPER && previous === UPPER && kind === LOWER) boundaries.push(i - 1);
      }
      before = previous;
      previous = kind;
      i++;
    }
    if (!ascii) {
      at = placeUnicodeWord(text.slice(start, i), at, put);
      continue;
    }
    const folded = cutAscii(lowerSlice(start, i));
    if (boundaries.length === 0) {
      put(folded, at++);
      continue;
    }
    let from = start;
    boundaries.push(i);
    for (const [k, to] of boundaries.entries()) {
      put(cutAscii(lowerSlice(from, to)), at + k);
      put(folded, at + k);
      from = to;
    }
    at += boundaries.length;
  }
  return lexemes;
}

const cutAscii = (lexeme: string) => (lexeme.length > LEXEME_LIMIT ? lexeme.slice(0, LEXEME_LIMIT) : lexeme);

/** A word with a non-ASCII character, from position `at`: returns the next free position. */
function placeUnicodeWord(word: string, at: number, put: (lexeme: string, position: number) => void): number {
  const folded = foldText(word);
  if (SUBWORD_BOUNDARY.test(word) && !isUnspaced(folded)) {
    const parts = word.split(SUBWORD_BOUNDARY);
    parts.forEach((part, i) => {
      put(cut(foldText(part)), at + i);
      put(cut(folded), at + i);
    });
    return at + parts.length;
  }
  return at + placeWord(folded, at, put);
}

/** The lexemes a query term must find, each at its distance from the previous one (unspaced runs by their pairs). */
export function queryLexemes(foldedTerm: string): QueryLexeme[] {
  const placed: { lexeme: string; position: number }[] = [];
  let at = 1;
  for (const [word] of foldedTerm.matchAll(WORD)) {
    if (!isUnspaced(word)) {
      placed.push({ lexeme: cut(word), position: at++ });
      continue;
    }
    for (const run of word.match(UNSPACED_RUNS) ?? []) {
      if (!UNSPACED.test(run)) {
        placed.push({ lexeme: cut(run), position: at++ });
        continue;
      }
      const chars = Array.from(run);
      if (chars.length === 1) placed.push({ lexeme: chars[0]!, position: at });
      for (let i = 0; i + 1 < chars.length; i++) placed.push({ lexeme: chars[i]! + chars[i + 1]!, position: at + i });
      at += chars.length;
    }
  }
  return placed.map((p, i) => ({ lexeme: p.lexeme, distance: i === 0 ? 0 : p.position - placed[i - 1]!.position }));
}

export function quoteLexeme(lexeme: string): string {
  if (!lexeme.includes('\\') && !lexeme.includes("'")) return `'${lexeme}'`;
  return `'${lexeme.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`;
}
