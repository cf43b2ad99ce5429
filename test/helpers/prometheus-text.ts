// A strict reader of Prometheus' text exposition format (version 0.0.4), checking what
// `promtool check metrics` and Prometheus' own parser refuse: a sample of no declared family
// or before its TYPE, a malformed name, label or value, a duplicate series, a histogram whose
// buckets are not cumulative, lack +Inf or disagree with its _count.

export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface Family {
  readonly name: string;
  type: string;
  help: string;
  readonly samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);
const SUFFIXES: Readonly<Record<string, readonly string[]>> = {
  histogram: ['_bucket', '_sum', '_count'],
  summary: ['_sum', '_count', ''],
  counter: [''],
  gauge: [''],
  untyped: [''],
};

/** Parses `text`; throws an Error naming the line for anything a scraper would refuse. */
export function parseExposition(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const seen = new Set<string>();
  if (!text.endsWith('\n')) throw new Error('the exposition must end with a line break');
  text.split('\n').forEach((line, index) => {
    const where = `line ${index + 1}: ${line}`;
    if (line === '') return;
    if (line.startsWith('#')) return comment(line, families, where);
    const sample = parseSample(line, where);
    const family = familyOf(sample.name, families);
    if (!family) throw new Error(`a sample of no declared family (${where})`);
    const key = `${sample.name}${JSON.stringify(Object.entries(sample.labels).sort())}`;
    if (seen.has(key)) throw new Error(`a duplicate series (${where})`);
    seen.add(key);
    family.samples.push(sample);
  });
  for (const family of families.values()) if (family.type === 'histogram') checkHistogram(family);
  return families;
}

function comment(line: string, families: Map<string, Family>, where: string): void {
  const match = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
  if (!match) return;
  const [, kind, name = '', rest = ''] = match;
  if (!NAME.test(name)) throw new Error(`a bad metric name (${where})`);
  let family = families.get(name);
  if (!family) {
    family = { name, type: 'untyped', help: '', samples: [] };
    families.set(name, family);
  }
  if (kind === 'HELP') family.help = rest;
  else {
    if (!TYPES.has(rest)) throw new Error(`an unknown type (${where})`);
    if (family.samples.length > 0) throw new Error(`a TYPE after samples (${where})`);
    family.type = rest;
  }
}

function familyOf(name: string, families: Map<string, Family>): Family | undefined {
  for (const family of families.values())
    for (const suffix of SUFFIXES[family.type] ?? [''])
      if (name === family.name + suffix) return family;
  return undefined;
}

function parseSample(line: string, where: string): Sample {
  const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)( -?\d+)?$/.exec(line);
  if (!match) throw new Error(`a malformed sample (${where})`);
  const labels: Record<string, string> = {};
  let rest = match[3] ?? '';
  while (rest !== '') {
    const label = /^([^=]+)="((?:[^"\\]|\\["\\n])*)"(,|$)/.exec(rest);
    if (!label || !LABEL.test(label[1] ?? '')) throw new Error(`a malformed label (${where})`);
    const name = label[1] as string;
    if (Object.hasOwn(labels, name)) throw new Error(`a repeated label (${where})`);
    labels[name] = (label[2] ?? '').replace(/\\(["\\n])/g, (_, c: string) =>
      c === 'n' ? '\n' : c,
    );
    rest = rest.slice(label[0].length);
  }
  const raw = match[4] as string;
  // As Go's ParseFloat, which Prometheus uses: NaN and Inf in any case.
  const special = /^(nan|[+-]?inf)$/i.test(raw);
  const value = special
    ? Number(raw.replace(/inf/i, 'Infinity').replace(/nan/i, 'NaN'))
    : Number(raw);
  if (!special && (raw.trim() === '' || Number.isNaN(value)))
    throw new Error(`a malformed value (${where})`);
  return { name: match[1] as string, labels, value };
}

function checkHistogram(family: Family): void {
  const groups = new Map<string, { buckets: Array<[number, number]>; count?: number }>();
  for (const sample of family.samples) {
    const { le, ...others } = sample.labels;
    const key = JSON.stringify(Object.entries(others).sort());
    const group = groups.get(key) ?? { buckets: [] };
    groups.set(key, group);
    if (sample.name.endsWith('_bucket')) {
      if (le === undefined) throw new Error(`${family.name}: a bucket without le`);
      group.buckets.push([le === '+Inf' ? Infinity : Number(le), sample.value]);
    } else if (sample.name.endsWith('_count')) group.count = sample.value;
  }
  for (const [key, group] of groups) {
    const sorted = [...group.buckets].sort((a, b) => a[0] - b[0]);
    if (sorted.at(-1)?.[0] !== Infinity) throw new Error(`${family.name}${key}: no +Inf bucket`);
    for (let index = 1; index < sorted.length; index += 1)
      if ((sorted[index] as [number, number])[1] < (sorted[index - 1] as [number, number])[1])
        throw new Error(`${family.name}${key}: buckets are not cumulative`);
    if (group.count !== sorted.at(-1)?.[1])
      throw new Error(`${family.name}${key}: _count differs from the +Inf bucket`);
  }
}

/** The value of the series of `name` whose labels include `labels` (summed over the rest). */
export function valueOf(
  families: Map<string, Family>,
  name: string,
  labels: Readonly<Record<string, string>> = {},
): number | undefined {
  let total: number | undefined;
  for (const family of families.values())
    for (const sample of family.samples) {
      if (sample.name !== name) continue;
      if (!Object.entries(labels).every(([key, value]) => sample.labels[key] === value)) continue;
      total = (total ?? 0) + sample.value;
    }
  return total;
}
