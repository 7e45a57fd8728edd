/**
 * JSON that reads back exactly as it was sent.
 *
 * Agent output is arbitrary: strings may hold `\u0000` or lone surrogates (`\ud800`), and numbers may
 * be larger or more precise than a double, or written in a form `JSON.stringify` does not write
 * (`120.0`, `1e2`, `-0`). `JSON.parse` keeps the strings (and `JSON.stringify`
 * writes them back as the same escapes) but rounds such numbers. So:
 *
 * - `parseJson` scans the text once, outside strings, for the nesting depth and for number literals
 *   that would not be written back as they are. The common case has none and is plain `JSON.parse`. Otherwise a
 *   small parser builds the same values and remembers each inexact literal beside the value it
 *   rounded.
 * - `stringifyJson` writes a value parsed here with those literals back in place, and is plain
 *   `JSON.stringify` for anything that holds none.
 *
 * Nesting is limited to `MAX_JSON_DEPTH`, the depth Python's own `json` module can write (its
 * recursion limit), so nothing deeper can exhaust our stack later (validation, `JSON.stringify`).
 */

export const MAX_JSON_DEPTH = 1000;

/**
 * The text is not JSON we accept; `position` is the character offset where that was found. The
 * message never quotes the text (it may hold a secret).
 */
export class JsonSyntaxError extends Error {
  override name = 'JsonSyntaxError';
  constructor(
    message: string,
    readonly position: number | undefined,
  ) {
    super(message);
  }
}

type Container = Record<string, unknown> | unknown[];

/**
 * For a container parsed by `parseExactly`: the literals of its own members that a double rounds,
 * by key (array indices as strings). Present only for containers that have such a member.
 */
const exactLiterals = new WeakMap<Container, Map<string, string>>();
/** Containers whose subtree (themselves included) holds a remembered literal. */
const holdsExactLiterals = new WeakSet<Container>();

const enum Char {
  Quote = 0x22,
  Backslash = 0x5c,
  OpenBracket = 0x5b,
  CloseBracket = 0x5d,
  OpenBrace = 0x7b,
  CloseBrace = 0x7d,
  Minus = 0x2d,
  Zero = 0x30,
  Nine = 0x39,
}

/** Digits, sign, point and exponent: the characters a number literal is made of. */
function isNumberChar(code: number): boolean {
  return (code >= Char.Zero && code <= Char.Nine) || code === 0x2e || code === 0x65 || code === 0x45 || code === 0x2b || code === Char.Minus;
}

/**
 * True when `JSON.stringify` of the number `literal` parses to writes `literal` itself, so nothing
 * needs remembering: an integer of at most 15 digits always does; `120.0`, `1.50`, `1e2`, `-0` and
 * anything a double rounds do not (they would read back as `120`, `1.5`, `100`, `0`, or another number).
 */
function isWrittenBack(literal: string): boolean {
  if (literal.length < 16 && !/[.eE]/.test(literal) && literal !== '-0') return true;
  return String(Number(literal)) === literal;
}

/**
 * One pass over the text outside strings: the nesting depth (refused past `MAX_JSON_DEPTH`) and
 * whether any number literal is inexact as a double. Syntax errors are left to the parser.
 */
function scan(text: string): { inexactNumbers: boolean } {
  let depth = 0;
  let inexactNumbers = false;
  const length = text.length;
  for (let i = 0; i < length; i++) {
    const code = text.charCodeAt(i);
    if (code === Char.Quote) {
      // Skip the string: to the next quote that no backslash escapes (an even run of backslashes
      // before a quote escapes only themselves). indexOf finds quotes far faster than a loop.
      for (;;) {
        const quote = text.indexOf('"', i + 1);
        if (quote < 0) {
          i = length;
          break;
        }
        let backslashes = 0;
        while (text.charCodeAt(quote - 1 - backslashes) === Char.Backslash) backslashes++;
        i = quote;
        if (backslashes % 2 === 0) break;
      }
    } else if (code === Char.OpenBracket || code === Char.OpenBrace) {
      if (++depth > MAX_JSON_DEPTH) {
        throw new JsonSyntaxError(`JSON nested deeper than ${MAX_JSON_DEPTH} levels`, i);
      }
    } else if (code === Char.CloseBracket || code === Char.CloseBrace) {
      depth--;
    } else if (code === Char.Minus || (code >= Char.Zero && code <= Char.Nine)) {
      const start = i;
      let exponent = false;
      let fraction = false;
      while (i + 1 < length && isNumberChar(text.charCodeAt(i + 1))) {
        i++;
        const c = text.charCodeAt(i);
        if (c === 0x65 || c === 0x45) exponent = true;
        else if (c === 0x2e) fraction = true;
      }
      // Short integer literals are written back as they are (see isWrittenBack), without slicing them out.
      if (!inexactNumbers && (fraction || exponent || i + 1 - start >= 16 || (code === Char.Minus && text.charCodeAt(start + 1) === Char.Zero)) && !isWrittenBack(text.slice(start, i + 1))) inexactNumbers = true;
    }
  }
  return { inexactNumbers };
}

/** Parses JSON text; see the module comment. Throws `JsonSyntaxError` for text we do not accept. */
export function parseJson(text: string): unknown {
  const { inexactNumbers } = scan(text);
  if (inexactNumbers) return new ExactParser(text).parseDocument();
  try {
    return JSON.parse(text);
  } catch {
    // V8's message quotes the text around the error, which may hold a secret: the exact parser
    // finds the same error and names only its position.
  }
  new ExactParser(text).parseDocument();
  throw new JsonSyntaxError('Invalid JSON', undefined);
}

/** A recursive-descent JSON parser that remembers inexact number literals; depth is bounded by `scan`. */
class ExactParser {
  private i = 0;
  constructor(private readonly text: string) {}

  parseDocument(): unknown {
    const { value } = this.parseValue();
    this.skipWhitespace();
    if (this.i < this.text.length) this.fail('Unexpected non-whitespace character after JSON');
    return value;
  }

  private fail(message: string): never {
    throw new JsonSyntaxError(`${message} at position ${this.i}`, this.i);
  }

  private skipWhitespace(): void {
    const { text } = this;
    while (this.i < text.length) {
      const c = text.charCodeAt(this.i);
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
      this.i++;
    }
  }

  /** A value, and, for a number, its literal when a double rounds it; for a container, whether it holds such literals. */
  private parseValue(): { value: unknown; literal?: string; holds?: boolean } {
    this.skipWhitespace();
    const c = this.text.charCodeAt(this.i);
    if (c === Char.OpenBrace) return this.parseObject();
    if (c === Char.OpenBracket) return this.parseArray();
    if (c === Char.Quote) return { value: this.parseString() };
    if (c === Char.Minus || (c >= Char.Zero && c <= Char.Nine)) return this.parseNumber();
    for (const [word, value] of [['true', true], ['false', false], ['null', null]] as const) {
      if (this.text.startsWith(word, this.i)) {
        this.i += word.length;
        return { value };
      }
    }
    return this.fail(this.i >= this.text.length ? 'Unexpected end of JSON input' : 'Unexpected token');
  }

  private parseString(): string {
    const start = this.i;
    const { text } = this;
    for (this.i++; this.i < text.length; this.i++) {
      const c = text.charCodeAt(this.i);
      if (c === Char.Backslash) this.i++;
      else if (c === Char.Quote) break;
    }
    if (this.i >= text.length) this.fail('Unterminated string in JSON');
    this.i++;
    try {
      // The engine's own parser for the token: escapes and invalid characters exactly as JSON.parse.
      return JSON.parse(text.slice(start, this.i)) as string;
    } catch {
      return this.fail('Bad string in JSON');
    }
  }

  private parseNumber(): { value: number; literal?: string } {
    const match = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
    match.lastIndex = this.i;
    const found = match.exec(this.text);
    if (!found) this.fail('Bad number in JSON');
    this.i += found[0].length;
    const literal = found[0];
    return isWrittenBack(literal) ? { value: Number(literal) } : { value: Number(literal), literal };
  }

  private expect(code: number, what: string): void {
    this.skipWhitespace();
    if (this.text.charCodeAt(this.i) !== code) this.fail(`Expected ${what}`);
    this.i++;
  }

  private remember(container: Container, literals: Map<string, string> | undefined, holds: boolean): boolean {
    if (literals) exactLiterals.set(container, literals);
    if (holds) holdsExactLiterals.add(container);
    return holds;
  }

  private parseArray(): { value: unknown[]; holds: boolean } {
    this.i++;
    const array: unknown[] = [];
    let literals: Map<string, string> | undefined;
    let holds = false;
    this.skipWhitespace();
    if (this.text.charCodeAt(this.i) === Char.CloseBracket) {
      this.i++;
      return { value: array, holds };
    }
    for (;;) {
      const item = this.parseValue();
      if (item.literal !== undefined) (literals ??= new Map()).set(String(array.length), item.literal);
      holds ||= item.literal !== undefined || item.holds === true;
      array.push(item.value);
      this.skipWhitespace();
      if (this.text.charCodeAt(this.i) === Char.CloseBracket) break;
      this.expect(0x2c, "',' or ']'");
    }
    this.i++;
    return { value: array, holds: this.remember(array, literals, holds) };
  }

  private parseObject(): { value: Record<string, unknown>; holds: boolean } {
    this.i++;
    const object: Record<string, unknown> = {};
    let literals: Map<string, string> | undefined;
    let holds = false;
    this.skipWhitespace();
    if (this.text.charCodeAt(this.i) === Char.CloseBrace) {
      this.i++;
      return { value: object, holds };
    }
    for (;;) {
      this.skipWhitespace();
      if (this.text.charCodeAt(this.i) !== Char.Quote) this.fail('Expected property name');
      const key = this.parseString();
      this.expect(0x3a, "':'");
      const member = this.parseValue();
      // As JSON.parse does: "__proto__" becomes an own property, never the object's prototype.
      Object.defineProperty(object, key, { value: member.value, writable: true, enumerable: true, configurable: true });
      if (member.literal !== undefined) (literals ??= new Map()).set(key, member.literal);
      else literals?.delete(key); // a later duplicate key replaces the earlier value
      holds ||= member.literal !== undefined || member.holds === true;
      this.skipWhitespace();
      if (this.text.charCodeAt(this.i) === Char.CloseBrace) break;
      this.expect(0x2c, "',' or '}'");
    }
    this.i++;
    return { value: object, holds: this.remember(object, literals, holds) };
  }
}

/**
 * `JSON.stringify`, except that numbers parsed by `parseJson` from literals a double rounds are
 * written as those literals (while the value still is that number). A literal is remembered beside
 * the array or object holding it, so a bare top-level number is written as the double it became.
 */
export function stringifyJson(value: unknown): string {
  if (value === null || typeof value !== 'object' || !holdsExactLiterals.has(value as Container)) {
    return JSON.stringify(value);
  }
  const container = value as Container;
  const literals = exactLiterals.get(container);
  const member = (key: string, item: unknown): string => {
    const literal = literals?.get(key);
    if (literal !== undefined && typeof item === 'number' && item === Number(literal)) return literal;
    return stringifyJson(item) ?? 'null';
  };
  if (Array.isArray(container)) {
    return `[${container.map((item, index) => member(String(index), item)).join(',')}]`;
  }
  const parts: string[] = [];
  for (const [key, item] of Object.entries(container)) {
    if (item === undefined || typeof item === 'function' || typeof item === 'symbol') continue;
    parts.push(`${JSON.stringify(key)}:${member(key, item)}`);
  }
  return `{${parts.join(',')}}`;
}

/**
 * The decimal text of the number `container[key]` as it was sent: the literal `parseJson` remembered
 * when a double rounds it, else the number's shortest form, which for such a literal is its value.
 * Undefined when the member is not a number.
 */
export function numberTextOf(container: object, key: string): string | undefined {
  const value = (container as Record<string, unknown>)[key];
  if (typeof value !== 'number') return undefined;
  const literal = exactLiterals.get(container as Container)?.get(key);
  return literal !== undefined && value === Number(literal) ? literal : String(value);
}
