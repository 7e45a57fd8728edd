import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../../generated/openapi.ts';
import { InvalidInputError } from '../errors.ts';
import { parseJson } from '../lossless-json.ts';
import { toSpendReport } from './mapper.ts';
import * as queries from './queries.ts';

export type SpendReport = components['schemas']['SpendReport'];
export type SpendGrouping = SpendReport['group_by'];

export interface SpendQuery {
  groupBy: SpendGrouping;
  since?: string;
  until?: string;
  /** Only the charges this member caused. */
  memberId?: string;
  limit: number;
  offset: number;
  /** `amount`: largest first, whatever the grouping. */
  order: 'default' | 'amount';
}

/** The instants PostgreSQL takes from an ISO 8601 string with a four-digit year. */
const EARLIEST = Date.parse('0001-01-01T00:00:00Z');
const LATEST = Date.parse('9999-12-31T23:59:59.999Z');

/** A `date-time` query parameter as an ISO instant; one JavaScript cannot read, or before year 1, is a 422. */
function instantOf(name: 'since' | 'until', value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const instant = Date.parse(value);
  if (Number.isNaN(instant) || instant < EARLIEST || instant > LATEST) {
    throw new InvalidInputError('Input should be a valid datetime', ['query', name], 'datetime_from_date_parsing', value);
  }
  return new Date(instant).toISOString();
}

/** The spend ledger as its owner reads it (`getSpend`); charges are written by `chargeConversationSpend`. */
export class SpendService {
  constructor(private readonly em: EntityManager) {}

  /** The organization's charges in `[since, until)` (of one member when asked), grouped, one page, with the totals of the range. */
  async report(orgId: string, query: SpendQuery): Promise<SpendReport> {
    const since = instantOf('since', query.since);
    const until = instantOf('until', query.until);
    if (since !== undefined && until !== undefined && Date.parse(since) >= Date.parse(until)) {
      throw new InvalidInputError('Value error, until must be later than since', ['query', 'until'], 'value_error', query.until);
    }
    const range = { ownerId: orgId, since, until, memberId: query.memberId };
    const totals = await queries.spendTotals(this.em, query.groupBy, range);
    const rows = await queries.spendGroups(this.em, query.groupBy, range, query);
    const keys = rows.map((row) => row.key);
    const labels = query.groupBy === 'conversation' ? await this.titles(keys) : query.groupBy === 'member' ? await this.emails(keys) : new Map<string, string | null>();
    return toSpendReport(query.groupBy, { since: since ?? null, until: until ?? null }, totals, rows, labels, query);
  }

  /** The e-mail of each member (the key '' is the charges from before members were recorded). */
  private async emails(memberIds: string[]): Promise<Map<string, string | null>> {
    const ids = memberIds.filter((id) => id !== '');
    if (ids.length === 0) return new Map();
    return new Map((await queries.userEmails(this.em, ids)).map((row) => [row.id, row.email]));
  }

  /** The latest title of each conversation (JSON text: a title may hold `\u0000`). */
  private async titles(conversationIds: string[]): Promise<Map<string, string | null>> {
    const titles = new Map<string, string | null>();
    if (conversationIds.length === 0) return titles;
    const rows = await queries.conversationTitles(this.em, conversationIds);
    for (const row of rows) titles.set(row.conversation_id, row.title === null ? null : (parseJson(row.title) as string | null));
    return titles;
  }
}
