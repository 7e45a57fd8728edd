import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../../generated/openapi.ts';
import { InvalidInputError } from '../errors.ts';
import { parseJson } from '../lossless-json.ts';
import { toUsageReport } from './mapper.ts';
import * as queries from './queries.ts';

export type UsageReport = components['schemas']['UsageReport'];

export interface UsageQuery {
  groupBy: UsageReport['group_by'];
  /** UTC days, `YYYY-MM-DD` (the schema has checked the form and that the day exists). */
  since?: string;
  until?: string;
  limit: number;
}

const DAY_MS = 86_400_000;
/** The range when none is given: the last 30 days, today included. */
export const DEFAULT_DAYS = 30;
/** The longest range: a leap year. */
export const MAX_DAYS = 366;
/** The days PostgreSQL's `date` and an ISO year of four digits both hold. */
const EARLIEST = Date.parse('0001-01-01T00:00:00Z');
const LATEST = Date.parse('9999-12-31T00:00:00Z');

const dayOf = (ms: number): string => new Date(ms).toISOString().slice(0, 10);

function dayMs(name: 'since' | 'until', day: string): number {
  const ms = Date.parse(`${day}T00:00:00Z`);
  if (Number.isNaN(ms) || ms < EARLIEST || ms > LATEST) throw new InvalidInputError('Input should be a valid date', ['query', name], 'date_from_datetime_parsing', day);
  return ms;
}

/** `[since, until)` in UTC days from what was asked, defaulting to the 30 days up to today; too long or backwards is a 422 naming the parameter given. */
export function usageRange(query: Pick<UsageQuery, 'since' | 'until'>, now = Date.now()): { since: string; until: string } {
  const until = query.until === undefined ? Math.floor(now / DAY_MS) * DAY_MS + DAY_MS : dayMs('until', query.until);
  const since = query.since === undefined ? until - DEFAULT_DAYS * DAY_MS : dayMs('since', query.since);
  // Both given: `until` is the one that ends the range, as getSpend names it.
  const named: 'since' | 'until' = query.until !== undefined ? 'until' : 'since';
  const input = named === 'until' ? query.until : query.since;
  if (since >= until) throw new InvalidInputError('Value error, until must be later than since', ['query', named], 'value_error', input);
  const days = (until - since) / DAY_MS;
  if (days > MAX_DAYS) {
    throw new InvalidInputError(`Value error, at most ${MAX_DAYS} days from since to until (this range has ${days})`, ['query', named], 'value_error', input);
  }
  return { since: dayOf(since), until: dayOf(until) };
}

/** Where the caller's money and tokens went (`getUsage`), from `usage_daily`. */
export class UsageService {
  constructor(private readonly em: EntityManager) {}

  /** The organization's usage in a range of UTC days, grouped, with the totals of the range. */
  async report(orgId: string, query: UsageQuery): Promise<UsageReport> {
    const range = { ownerId: orgId, ...usageRange(query) };
    const { rows, totals } = await queries.usageReport(this.em, query.groupBy, range, query.groupBy === 'day' ? MAX_DAYS : query.limit);
    const labels = await this.labels(query.groupBy, rows.map((row) => row.key));
    return toUsageReport({ groupBy: query.groupBy, since: range.since, until: range.until, limit: query.limit }, totals, rows, labels);
  }

  /** People's names for the keys: conversation titles (the owner's rename first), members' e-mails. */
  private async labels(groupBy: UsageQuery['groupBy'], keys: string[]): Promise<Map<string, string | null>> {
    const labels = new Map<string, string | null>();
    if (keys.length === 0) return labels;
    if (groupBy === 'conversation') {
      for (const row of await queries.conversationTitles(this.em, keys)) {
        labels.set(row.id, row.renamed_title ?? (row.info_title === null ? null : (parseJson(row.info_title) as string | null)));
      }
    } else if (groupBy === 'member') {
      for (const row of await queries.userEmails(this.em, keys)) labels.set(row.id, row.email);
    }
    return labels;
  }
}
