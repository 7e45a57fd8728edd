/**
 * A strict parser of the Prometheus text exposition format (version 0.0.4), for tests: it throws on
 * any line a Prometheus server would refuse, on samples of an undeclared family, on a family
 * declared twice, and on histograms whose buckets are not cumulative or disagree with `_count`.
 */

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface MetricFamily {
  name: string;
  type: 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';
  help?: string;
  samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

// Prometheus reads a sample with Go's strconv.ParseFloat, which takes NaN and the infinities in any
// letter case: prom-client writes NaN as "Nan" (e.g. the event-loop lag mean before its first sample).
const SPECIAL_VALUES = new Map<string, number>([
  ['nan', NaN],
  ['inf', Infinity],
  ['+inf', Infinity],
  ['infinity', Infinity],
  ['+infinity', Infinity],
  ['-inf', -Infinity],
  ['-infinity', -Infinity],
]);

function parseValue(text: string, line: string): number {
  const special = SPECIAL_VALUES.get(text.toLowerCase());
  if (special !== undefined) return special;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) throw new Error(`bad sample value "${text}" in: ${line}`);
  return Number(text);
}

/** Reads `{a="x",b="y"}` starting at `text[0] === '{'`; returns the labels and the rest of the line. */
function parseLabels(text: string, line: string): { labels: Record<string, string>; rest: string } {
  const labels: Record<string, string> = {};
  let i = 1;
  for (;;) {
    if (text[i] === '}') return { labels, rest: text.slice(i + 1) };
    const nameMatch = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(text.slice(i));
    if (!nameMatch) throw new Error(`bad label name in: ${line}`);
    const name = nameMatch[0];
    i += name.length;
    if (text.slice(i, i + 2) !== '="') throw new Error(`expected ="" after label ${name} in: ${line}`);
    i += 2;
    let value = '';
    for (;;) {
      const c = text[i];
      if (c === undefined) throw new Error(`unterminated label value in: ${line}`);
      if (c === '"') break;
      if (c === '\\') {
        const next = text[i + 1];
        if (next === 'n') value += '\n';
        else if (next === '\\' || next === '"') value += next;
        else throw new Error(`bad escape \\${next} in: ${line}`);
        i += 2;
      } else {
        value += c;
        i++;
      }
    }
    i++;
    if (name in labels) throw new Error(`label ${name} repeated in: ${line}`);
    labels[name] = value;
    if (text[i] === ',') i++;
    else if (text[i] !== '}') throw new Error(`expected , or } after label ${name} in: ${line}`);
  }
}

/** The family a sample belongs to: histogram and summary samples carry a suffix. */
function familyOf(sampleName: string, families: Map<string, MetricFamily>): MetricFamily | undefined {
  const direct = families.get(sampleName);
  if (direct) return direct;
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (!sampleName.endsWith(suffix)) continue;
    const family = families.get(sampleName.slice(0, -suffix.length));
    if (family && (family.type === 'histogram' || (family.type === 'summary' && suffix !== '_bucket'))) return family;
  }
  return undefined;
}

function checkHistogram(family: MetricFamily): void {
  const series = new Map<string, Sample[]>();
  const key = (labels: Record<string, string>) =>
    JSON.stringify(Object.entries(labels).filter(([name]) => name !== 'le').sort());
  for (const sample of family.samples) {
    const k = key(sample.labels);
    if (!series.has(k)) series.set(k, []);
    series.get(k)!.push(sample);
  }
  for (const samples of series.values()) {
    const buckets = samples.filter((s) => s.name === `${family.name}_bucket`);
    const count = samples.find((s) => s.name === `${family.name}_count`);
    if (!count || !samples.some((s) => s.name === `${family.name}_sum`)) throw new Error(`${family.name}: a series lacks _sum or _count`);
    const bounds = buckets.map((b) => {
      if (b.labels.le === undefined) throw new Error(`${family.name}_bucket without le`);
      return { le: parseValue(b.labels.le, b.labels.le), value: b.value };
    });
    bounds.sort((a, b) => a.le - b.le);
    for (let i = 1; i < bounds.length; i++) {
      if (bounds[i]!.value < bounds[i - 1]!.value) throw new Error(`${family.name}: buckets are not cumulative`);
    }
    const last = bounds.at(-1);
    if (!last || last.le !== Infinity) throw new Error(`${family.name}: no +Inf bucket`);
    if (last.value !== count.value) throw new Error(`${family.name}: +Inf bucket ${last.value} differs from _count ${count.value}`);
  }
}

/** Parses a whole exposition; every sample must belong to a family declared by `# TYPE` before it. */
export function parsePrometheusText(text: string): Map<string, MetricFamily> {
  if (!text.endsWith('\n')) throw new Error('the exposition must end with a newline');
  const families = new Map<string, MetricFamily>();
  const seenSeries = new Set<string>();
  for (const line of text.split('\n').slice(0, -1)) {
    if (line === '') continue;
    if (line.startsWith('#')) {
      const match = /^# (HELP|TYPE) (\S+) (.*)$/.exec(line);
      if (!match) {
        if (/^# (HELP|TYPE)/.test(line)) throw new Error(`bad comment line: ${line}`);
        continue;
      }
      const [, keyword, name, rest] = match as unknown as [string, string, string, string];
      if (!NAME.test(name)) throw new Error(`bad metric name in: ${line}`);
      if (keyword === 'TYPE') {
        if (!TYPES.has(rest)) throw new Error(`bad type in: ${line}`);
        const existing = families.get(name);
        if (existing && (existing.type !== 'untyped' || existing.samples.length > 0)) throw new Error(`family ${name} declared twice`);
        families.set(name, { name, type: rest as MetricFamily['type'], help: existing?.help, samples: [] });
      } else {
        const existing = families.get(name);
        if (existing?.help !== undefined) throw new Error(`HELP of ${name} given twice`);
        if (existing) existing.help = rest;
        else families.set(name, { name, type: 'untyped', help: rest, samples: [] });
      }
      continue;
    }
    const nameMatch = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line);
    if (!nameMatch) throw new Error(`bad sample line: ${line}`);
    const name = nameMatch[0];
    let rest = line.slice(name.length);
    let labels: Record<string, string> = {};
    if (rest.startsWith('{')) ({ labels, rest } = parseLabels(rest, line));
    const fields = rest.trim().split(/\s+/);
    if (!rest.startsWith(' ') || fields.length < 1 || fields.length > 2) throw new Error(`bad sample line: ${line}`);
    if (fields[1] !== undefined && !/^-?\d+$/.test(fields[1])) throw new Error(`bad timestamp in: ${line}`);
    for (const labelName of Object.keys(labels)) if (!LABEL_NAME.test(labelName)) throw new Error(`bad label in ${line}`);
    const family = familyOf(name, families);
    if (!family) throw new Error(`sample of undeclared family: ${line}`);
    const seriesKey = `${name}${JSON.stringify(Object.entries(labels).sort())}`;
    if (seenSeries.has(seriesKey)) throw new Error(`series repeated: ${line}`);
    seenSeries.add(seriesKey);
    const value = parseValue(fields[0]!, line);
    if (family.type === 'counter' && !(value >= 0)) throw new Error(`negative counter: ${line}`);
    family.samples.push({ name, labels, value });
  }
  for (const family of families.values()) if (family.type === 'histogram') checkHistogram(family);
  return families;
}

/** The sum of the samples named `name` whose labels include `labels`; 0 when there is none yet. */
export function sumSamples(families: Map<string, MetricFamily>, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const family of families.values()) {
    for (const sample of family.samples) {
      if (sample.name !== name) continue;
      if (Object.entries(labels).every(([key, value]) => sample.labels[key] === value)) sum += sample.value;
    }
  }
  return sum;
}
