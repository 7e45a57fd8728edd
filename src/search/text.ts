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
  return value.replace(LONE_SURROGATE, '\uFFFD').replace(/[\s\u0000]+/g, ' ');
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

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
  let folded = '';
  for (const c of text) folded += foldCodePoint(c);
  return folded;
}

/** Scripts written without spaces between words: matched by substrings (bigrams), not by words. */
const UNSPACED = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}\p{Script=Thai}\p{Script=Lao}\p{Script=Khmer}\p{Script=Myanmar}]/u;
const UNSPACED_RUNS = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}\p{Script=Thai}\p{Script=Lao}\p{Script=Khmer}\p{Script=Myanmar}\p{M}]+|[^\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}\p{Script=Thai}\p{Script=Lao}\p{Script=Khmer}\p{Script=Myanmar}]+/gu;
/** A word: letters, combining marks and digits. */
export const WORD = /[\p{L}\p{M}\p{N}]+/gu;
/** Where an identifier splits into words: camelCase, HTTPServer, letters and digits. */
const SUBWORD_BOUNDARY = /(?<=\p{Ll})(?=\p{Lu})|(?<=\p{Lu})(?=\p{Lu}\p{Ll})|(?<=\p{L})(?=\p{N})|(?<=\p{N})(?=\p{L})/u;

export function isUnspaced(text: string): boolean {
  return UNSPACED.test(text);
}

/** The n-grams of an unspaced run: its characters and its pairs. */
function unspacedGrams(run: string, into: Set<string>, withSingles: boolean): void {
  const chars = Array.from(run);
  if (chars.length === 1 || withSingles) for (const c of chars) into.add(c);
  for (let i = 0; i + 1 < chars.length; i++) into.add(chars[i]! + chars[i + 1]!);
}

/** The lexemes of a folded word: itself, or its unspaced runs' n-grams beside its other parts. */
function wordLexemes(word: string, into: Set<string>, forQuery: boolean): string[] {
  if (!isUnspaced(word)) {
    const lexeme = cut(word);
    into.add(lexeme);
    return [lexeme];
  }
  const added: string[] = [];
  for (const run of word.match(UNSPACED_RUNS) ?? []) {
    const before = new Set(into);
    if (isUnspaced(run)) unspacedGrams(run, into, !forQuery);
    else into.add(cut(run));
    for (const lexeme of into) if (!before.has(lexeme)) added.push(lexeme);
  }
  return added;
}

const cut = (lexeme: string) => (lexeme.length > LEXEME_LIMIT ? Array.from(lexeme).slice(0, LEXEME_LIMIT).join('') : lexeme);

/**
 * The index's lexemes of an event's text: every folded word, the words of its identifiers
 * (`parseDuration` → `parse`, `duration`), and the characters and pairs of unspaced scripts.
 */
export function indexLexemes(text: string): string[] {
  const lexemes = new Set<string>();
  for (const word of text.match(WORD) ?? []) {
    wordLexemes(foldText(word), lexemes, false);
    if (SUBWORD_BOUNDARY.test(word)) for (const part of word.split(SUBWORD_BOUNDARY)) wordLexemes(foldText(part), lexemes, false);
  }
  return [...lexemes];
}

/** The lexemes a query term must find, in order (a term's unspaced runs give their pairs). */
export function queryLexemes(foldedTerm: string): string[] {
  const lexemes = new Set<string>();
  const ordered: string[] = [];
  for (const word of foldedTerm.match(WORD) ?? []) for (const lexeme of wordLexemes(word, lexemes, true)) ordered.push(lexeme);
  return ordered;
}

/** `lexemes` as a tsvector literal (PostgreSQL takes it as it is: no parser, no dictionary, no locale). */
export function tsvectorLiteral(lexemes: readonly string[]): string {
  return lexemes.map(quoteLexeme).join(' ');
}

export function quoteLexeme(lexeme: string): string {
  return `'${lexeme.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`;
}

/** What the index stores of an event: its lexemes and its folded text (for phrases and substrings). */
export interface IndexedText {
  lexemes: string;
  body: string;
}

export function indexedText(text: string): IndexedText {
  return { lexemes: tsvectorLiteral(indexLexemes(text)), body: ` ${foldText(text)} ` };
}
