import { expect } from 'chai';
import fc from 'fast-check';
import { JsonSyntaxError, MAX_JSON_DEPTH, parseJson, stringifyJson } from '../../src/lossless-json.ts';

/** Fixed seed in CI; `FC_SEED`/`FC_RUNS` explore further on demand. */
const property = { seed: Number(process.env.FC_SEED ?? 20261122), numRuns: Number(process.env.FC_RUNS ?? 300) };

/** Any JSON number literal, written the ways a client may write it (long, precise, exponents, huge). */
const numberLiteral = fc.oneof(
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((value) => JSON.stringify(value)),
  fc.bigInt({ min: -(10n ** 40n), max: 10n ** 40n }).map(String),
  fc
    .tuple(fc.bigInt({ min: 0n, max: 10n ** 30n }), fc.stringMatching(/^\d{1,25}$/), fc.integer({ min: -500, max: 500 }))
    .map(([whole, fraction, exponent]) => `${whole}.${fraction}e${exponent}`),
);

/** JSON text with such literals anywhere, strings with every kind of character included. */
const jsonText: fc.Arbitrary<string> = fc.letrec<{ value: string }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    numberLiteral,
    fc.string({ unit: 'binary' }).map((s) => JSON.stringify(s)),
    fc.constantFrom('true', 'false', 'null'),
    fc.array(tie('value'), { maxLength: 5 }).map((items) => `[${items.join(', ')}]`),
    fc
      // Unique keys: a duplicate key drops the earlier value (tested on its own below).
      .uniqueArray(fc.tuple(fc.string({ unit: 'binary' }), tie('value')), { maxLength: 5, selector: ([key]) => key })
      .map((members) => `{${members.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`),
  ),
})).value;

/** The exact value of a decimal literal, as a comparable string: sign, digits, exponent. */
function exactDecimal(literal: string): string {
  const match = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(literal)!;
  const digits = (match[2]! + (match[3] ?? '')).replace(/^0+/, '');
  const stripped = digits.replace(/0+$/, '');
  if (stripped === '') return '0';
  const exponent = Number(match[4] ?? 0) - (match[3] ?? '').length + (digits.length - stripped.length);
  return `${match[1]}${stripped}e${exponent}`;
}

/** Every number literal of a JSON text (outside strings), exactly. */
function numbersOf(text: string): string[] {
  const numbers: string[] = [];
  const withoutStrings = text.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  for (const match of withoutStrings.matchAll(/-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g)) numbers.push(exactDecimal(match[0]));
  return numbers.sort();
}

describe('lossless JSON (src/lossless-json.ts)', () => {
  it('parses to the same values as JSON.parse, for any JSON text', () => {
    fc.assert(
      fc.property(jsonText, (text) => {
        const expected = JSON.parse(text);
        expect(parseJson(text)).to.deep.equal(expected);
      }),
      property,
    );
  });

  it('writes back every number literal inside a document exactly, and every string as JSON.stringify writes it', () => {
    fc.assert(
      fc.property(jsonText, (value) => {
        const text = `[${value}]`; // a literal is remembered beside its container
        const written = stringifyJson(parseJson(text));
        expect(JSON.parse(written)).to.deep.equal(JSON.parse(text));
        expect(numbersOf(written)).to.deep.equal(numbersOf(text));
      }),
      property,
    );
  });

  it('keeps integers beyond 2^53, long fractions and exponents a double cannot hold', () => {
    const text = '{"big":123456789012345678901234567890,"neg":-98765432109876543210,"precise":0.1000000000000000055511151231257827,"huge":1e400,"tiny":-2.5e-400,"plain":1.5,"list":[18446744073709551615,2]}';
    const written = stringifyJson(parseJson(text));
    for (const literal of ['123456789012345678901234567890', '-98765432109876543210', '0.1000000000000000055511151231257827', '1e400', '-2.5e-400', '18446744073709551615']) {
      expect(written).to.include(literal);
    }
    expect(JSON.parse(written)).to.deep.equal(JSON.parse(text));
  });

  it('keeps \\u0000 and lone surrogates as their escapes', () => {
    const text = '["a\\u0000b","\\ud800","\\udfff x","\\ud83d\\ude00",{"k\\u0000":"\\ud800"}]';
    const value = parseJson(text) as unknown[];
    expect(value[0]).to.equal('a\u0000b');
    expect(value[1]).to.equal('\ud800');
    expect(stringifyJson(value)).to.equal('["a\\u0000b","\\ud800","\\udfff x","😀",{"k\\u0000":"\\ud800"}]');
  });

  it('makes "__proto__" an own property, as JSON.parse does, on the exact path too', () => {
    for (const text of ['{"__proto__":{"polluted":1},"n":1}', '{"__proto__":{"polluted":1},"n":123456789012345678901}']) {
      const value = parseJson(text) as Record<string, unknown>;
      expect(Object.getPrototypeOf(value)).to.equal(Object.prototype);
      expect(Object.keys(value)).to.include('__proto__');
      expect(({} as Record<string, unknown>).polluted).to.equal(undefined);
      expect(JSON.parse(stringifyJson(value))).to.deep.equal(JSON.parse(text));
    }
  });

  it('lets a later duplicate key win, as JSON.parse does, also over an exact literal', () => {
    const value = parseJson('{"a":123456789012345678901,"a":2,"b":1,"b":123456789012345678902}');
    expect(stringifyJson(value)).to.equal('{"a":2,"b":123456789012345678902}');
  });

  it('writes the current value once validation has changed it (a trimmed string, a filled default)', () => {
    const value = parseJson('{"n":123456789012345678901,"m":123456789012345678902}') as Record<string, unknown>;
    value.n = 'coerced';
    value.extra = [];
    expect(stringifyJson(value)).to.equal('{"n":"coerced","m":123456789012345678902,"extra":[]}');
  });

  it(`accepts ${MAX_JSON_DEPTH} levels of nesting and refuses one more`, () => {
    const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);
    expect(() => parseJson(nested(MAX_JSON_DEPTH))).not.to.throw();
    expect(() => parseJson(nested(MAX_JSON_DEPTH + 1))).to.throw(JsonSyntaxError, /nested deeper than 1000/);
    // Brackets inside strings do not count.
    expect(() => parseJson(JSON.stringify(['['.repeat(5000)]))).not.to.throw();
  });

  it('refuses what JSON.parse refuses, on both paths, with a position', () => {
    for (const text of ['[1,]', '{"a" 1}', '01', '[1.]', '"\u0001"', '[123456789012345678901,]', '{"a":123456789012345678901', '']) {
      expect(() => JSON.parse(text), text).to.throw();
      expect(() => parseJson(text), text).to.throw(JsonSyntaxError);
    }
  });
});
