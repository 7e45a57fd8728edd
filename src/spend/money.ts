/**
 * Money as integer micro-dollars (millionths of a US dollar), in `bigint`: sums and differences are
 * exact, unlike dollars summed as doubles. The API shows each amount as `…_micro_usd` (an integer,
 * exact in any JSON parser up to 2^53) and `…_usd` (the same value in dollars, at most 6 decimals).
 */

export const MICROS_PER_USD = 1_000_000n;

const DECIMAL = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;

/**
 * A non-negative decimal number literal (JSON's grammar, as sent) in micro-dollars, rounded to the
 * nearest (half up). The caller has bounded it (the schema: 0 to 1,000,000), so the exponent is small.
 */
export function microUsdOfDecimal(literal: string): bigint {
  const match = DECIMAL.exec(literal);
  if (!match) throw new RangeError(`not a decimal number: ${literal}`);
  const [, sign, whole = '', fraction = '', exponent = '0'] = match;
  const digits = BigInt(whole + fraction);
  // The literal is digits × 10^scale dollars, so digits × 10^(scale + 6) micro-dollars.
  const shift = Number(exponent) - fraction.length + 6;
  let micros: bigint;
  if (shift >= 0) {
    micros = digits * 10n ** BigInt(shift);
  } else if (-shift > whole.length + fraction.length) {
    micros = 0n; // below a tenth of a micro-dollar: rounds to zero (and 10^shift stays small)
  } else {
    const divisor = 10n ** BigInt(-shift);
    micros = digits / divisor + (2n * (digits % divisor) >= divisor ? 1n : 0n);
  }
  if (sign === '-' && micros !== 0n) throw new RangeError(`negative amount: ${literal}`);
  return micros;
}

/** Micro-dollars as a plain decimal string of dollars with the fraction's trailing zeros dropped: 12300n → "0.0123". */
export function usdTextOf(micros: bigint): string {
  const negative = micros < 0n;
  const magnitude = negative ? -micros : micros;
  const whole = magnitude / MICROS_PER_USD;
  const fraction = (magnitude % MICROS_PER_USD).toString().padStart(6, '0').replace(/0+$/, '');
  return `${negative ? '-' : ''}${whole}${fraction ? `.${fraction}` : ''}`;
}

/**
 * Micro-dollars as a JSON number of dollars. `JSON.stringify` writes it as `usdTextOf` does: a
 * decimal of at most 15 significant digits (any amount under a billion dollars) reads back as itself.
 */
export function usdOf(micros: bigint): number {
  return Number(usdTextOf(micros));
}

/** Micro-dollars as a JSON integer; amounts beyond 2^53 (9 billion dollars) are not ours to show. */
export function microUsdNumberOf(micros: bigint): number {
  if (micros > BigInt(Number.MAX_SAFE_INTEGER) || micros < -BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new RangeError(`amount beyond 2^53 micro-dollars: ${micros}`);
  }
  return Number(micros);
}
