/**
 * The ISO 8601 forms this service reads as an instant: an event's own `timestamp` (the
 * agent-server writes `datetime.now().isoformat()`, without an offset) and the `since`/`until`
 * filters. A date, optionally a time (minutes, seconds and a fraction optional, `T` or a space
 * between), optionally `Z` or an offset; without an offset the time is UTC.
 */
const ISO_8601 = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?)?(Z|z|[+-]\d{2}(?::?\d{2})?)?$/;

/**
 * `value` as a UTC instant with microseconds (PostgreSQL's precision, further digits dropped), e.g.
 * `2025-01-15T10:30:03.123456Z`; null when it is not ISO 8601, names no real date or time, or falls
 * outside years 1–9999 once its offset is applied.
 */
export function isoInstant(value: unknown): string | null {
  if (typeof value !== 'string' || value.length > 64) return null;
  const match = ISO_8601.exec(value);
  if (!match) return null;
  const [, y, mo, d, h = '00', mi = '00', s = '00', fraction = '', zone = 'Z'] = match;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  const hour = Number(h);
  const minute = Number(mi);
  const second = Number(s);
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return null;
  if (day > new Date(Date.UTC(2000, month, 0)).getUTCDate() || (month === 2 && day === 29 && !isLeapYear(year))) return null;
  let offsetMinutes = 0;
  if (zone !== 'Z' && zone !== 'z') {
    const digits = zone.slice(1).replace(':', '');
    const offsetHours = Number(digits.slice(0, 2));
    const offsetRest = digits.length > 2 ? Number(digits.slice(2)) : 0;
    if (offsetHours > 15 || offsetRest > 59) return null;
    offsetMinutes = (zone[0] === '-' ? -1 : 1) * (offsetHours * 60 + offsetRest);
  }
  const micros = fraction.padEnd(6, '0').slice(0, 6);
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute - offsetMinutes, second, Number(micros.slice(0, 3)));
  const utcYear = date.getUTCFullYear();
  if (utcYear < 1 || utcYear > 9999) return null;
  return `${date.toISOString().replace(/^\+0*/, '').slice(0, -1)}${micros.slice(3)}Z`.padStart(27, '0');
}

function isLeapYear(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}
