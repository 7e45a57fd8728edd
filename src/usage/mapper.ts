import type { components } from '../../generated/openapi.ts';
import { microUsdNumberOf, usdOf } from '../spend/money.ts';
import type { UsageGroupRow, UsageSums } from './queries.ts';

type UsageReport = components['schemas']['UsageReport'];
type UsageAmounts = components['schemas']['UsageAmounts'];
type UsageRow = components['schemas']['UsageRow'];

/** A count summed by the database as a JSON integer; counts beyond 2^53 are not ours to show. */
function countOf(text: string): number {
  return microUsdNumberOf(BigInt(text));
}

function amountsOf(sums: UsageSums): UsageAmounts {
  const cost = BigInt(sums.cost);
  return {
    cost_usd: usdOf(cost),
    cost_micro_usd: microUsdNumberOf(cost),
    tokens_in: countOf(sums.tokens_in),
    tokens_out: countOf(sums.tokens_out),
    conversations: sums.conversations,
    llm_calls: countOf(sums.llm_calls),
  };
}

const WEEKDAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** A UTC day written out as in an HTTP date: `2026-11-27` → `Fri, 27 Nov 2026`. */
export function dayLabelOf(day: string): string {
  const date = new Date(`${day}T00:00:00Z`);
  return `${WEEKDAYS[date.getUTCDay()]}, ${date.getUTCDate()} ${MONTHS[date.getUTCMonth()]} ${day.slice(0, 4)}`;
}

/** The report: the groups with their labels (`labels` by key; days are written out here), the totals of the range. */
export function toUsageReport(
  query: { groupBy: UsageReport['group_by']; since: string; until: string; limit: number },
  totals: UsageSums & { groups: number },
  rows: UsageGroupRow[],
  labels: Map<string, string | null>,
): UsageReport {
  const label = (key: string): string | null => (query.groupBy === 'day' ? dayLabelOf(key) : (labels.get(key) ?? null));
  return {
    group_by: query.groupBy,
    since: query.since,
    until: query.until,
    rows: rows.map((row): UsageRow => ({ key: row.key, label: label(row.key), ...amountsOf(row) })),
    totals: amountsOf(totals),
    group_count: totals.groups,
    limit: query.limit,
  };
}
