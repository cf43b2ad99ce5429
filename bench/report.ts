// Benchmark results: each scenario's measurement turned into reported figures (throughput,
// latency percentiles, server CPU per GB, peak RSS, ratios to the limits that bound it), and the
// three generated files in the output directory: results.json (everything, for tools and for
// comparing branch against base), results.md (tables) and chart.svg (a bar chart of each
// scenario's ratio to its primary limit, hand-written SVG). All three carry the machine, the
// versions and the settings of the run. They are generated: edit this module, not them.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Limit } from './limits.js';
import type { MachineInfo } from './machine.js';
import { formatBytes } from './progress.js';
import type { Measured, Scenario } from './scenarios.js';

export interface Ratio {
  readonly limit: string;
  readonly value: number;
}

export interface ScenarioReport {
  readonly name: string;
  readonly title: string;
  readonly status: 'ok' | 'failed' | 'skipped';
  readonly reason?: string;
  readonly objects: number;
  readonly objectBytes: number;
  readonly concurrency: number;
  readonly operations: number;
  readonly bytes: number;
  readonly seconds: number;
  readonly throughput: { readonly value: number; readonly unit: string };
  readonly opsPerSecond: number;
  readonly megabytesPerSecond: number;
  readonly latencyMsP50: number;
  readonly latencyMsP99: number;
  readonly latencyMsMax: number;
  readonly serverCpuSeconds: number | null;
  readonly serverCpuSecondsPerGB: number | null;
  /** CPU of the client (the benchmark process and its load generator): it shares the machine. */
  readonly clientCpuSecondsPerGB: number | null;
  /** The load generator of the timed load (`native` or `node`); null when none ran. */
  readonly client: string | null;
  readonly serverPeakRssBytes: number | null;
  /** Shared pages (the LMDB index mapped by every process) divided among their processes. */
  readonly serverPeakPssBytes: number | null;
  /** Primary limit first. */
  readonly ratios: readonly Ratio[];
  readonly failures: readonly string[];
  readonly notes: readonly string[];
}

/** What every generated report records first: when, on what, and with which settings. */
export interface ReportHeader {
  readonly formatVersion: 1;
  readonly generatedAt: string;
  readonly machine: MachineInfo;
  readonly settings: Readonly<Record<string, string | number | boolean | null>>;
  readonly sizes: Readonly<Record<string, number>>;
}

export interface BenchReport extends ReportHeader {
  readonly limits: readonly Limit[];
  readonly limitFailures: readonly string[];
  readonly scenarios: readonly ScenarioReport[];
  readonly ok: boolean;
}

/** Per-second rate of a limit in base units: bytes for MB/s and GB/s, else counts. */
function limitRate(limit: Limit): { bytes: boolean; perSecond: number } {
  if (limit.unit === 'MB/s') return { bytes: true, perSecond: limit.value * 1e6 };
  if (limit.unit === 'GB/s') return { bytes: true, perSecond: limit.value * 1e9 };
  return { bytes: false, perSecond: limit.value };
}

interface Rates {
  readonly bytesPerSecond: number;
  readonly opsPerSecond: number;
}

/** Ratios to every named limit of the same dimension (bytes/s or operations/s). */
function ratiosOf(bounds: readonly string[], limits: readonly Limit[], rates: Rates): Ratio[] {
  const ratios: Ratio[] = [];
  for (const name of bounds) {
    const limit = limits.find((candidate) => candidate.name === name);
    if (limit === undefined || !(limit.value > 0)) continue;
    const rate = limitRate(limit);
    const value = (rate.bytes ? rates.bytesPerSecond : rates.opsPerSecond) / rate.perSecond;
    if (Number.isFinite(value)) ratios.push({ limit: name, value });
  }
  return ratios;
}

function statusOf(measured: Measured): ScenarioReport['status'] {
  if (measured.skipped !== undefined) return 'skipped';
  return measured.failures.length > 0 ? 'failed' : 'ok';
}

function perGigabyte(seconds: number | null, bytes: number): number | null {
  return seconds !== null && bytes > 0 ? seconds / (bytes / 1e9) : null;
}

export function scenarioReport(
  scenario: Scenario,
  measured: Measured,
  limits: readonly Limit[],
): ScenarioReport {
  const seconds = measured.seconds;
  const rates = {
    opsPerSecond: seconds > 0 ? measured.operations / seconds : 0,
    bytesPerSecond: seconds > 0 ? measured.bytes / seconds : 0,
  };
  const cpu = measured.window?.cpuSeconds ?? null;
  const status = statusOf(measured);
  return {
    name: scenario.name,
    title: scenario.title,
    status,
    ...(measured.skipped !== undefined ? { reason: measured.skipped } : {}),
    objects: measured.objects,
    objectBytes: measured.objectBytes,
    concurrency: measured.concurrency,
    operations: measured.operations,
    bytes: measured.bytes,
    seconds,
    throughput: {
      value: measured.unit === 'MB/s' ? rates.bytesPerSecond / 1e6 : rates.opsPerSecond,
      unit: measured.unit,
    },
    opsPerSecond: rates.opsPerSecond,
    megabytesPerSecond: rates.bytesPerSecond / 1e6,
    latencyMsP50: measured.latency.percentile(0.5) / 1000,
    latencyMsP99: measured.latency.percentile(0.99) / 1000,
    latencyMsMax: measured.latency.max / 1000,
    serverCpuSeconds: cpu,
    serverCpuSecondsPerGB: perGigabyte(cpu, measured.bytes),
    clientCpuSecondsPerGB: perGigabyte(measured.clientCpuSeconds, measured.bytes),
    client: measured.client,
    serverPeakRssBytes: measured.window?.peakRssBytes ?? null,
    serverPeakPssBytes: measured.window?.peakPssBytes ?? null,
    ratios: status === 'ok' ? ratiosOf(scenario.bounds, limits, rates) : [],
    failures: measured.failures,
    notes: measured.notes,
  };
}

export function fixed(value: number | null, digits: number): string {
  return value === null || !Number.isFinite(value) ? '–' : value.toFixed(digits);
}

/** A rate or count with three significant digits or so. */
export function amount(value: number): string {
  return value >= 100 ? value.toFixed(0) : value.toFixed(value >= 10 ? 1 : 2);
}

function throughputText(report: ScenarioReport): string {
  return `${amount(report.throughput.value)} ${report.throughput.unit}`;
}

function ratioText(report: ScenarioReport): string {
  const [primary, ...others] = report.ratios;
  if (primary === undefined) return '–';
  const rest = others.map((r) => `${r.value.toFixed(2)} of ${r.limit}`).join(', ');
  return `**${primary.value.toFixed(2)}** of ${primary.limit}${rest ? ` (${rest})` : ''}`;
}

function scenarioRow(report: ScenarioReport): string {
  if (report.status !== 'ok') {
    const status = report.status === 'skipped' ? 'skipped' : '**FAILED**';
    const why = (report.reason ?? report.failures[0] ?? '').replace(/\s+/g, ' ');
    return `| ${report.name} | ${status} | ${why.replace(/\|/g, '/')} | | | | | | | | |`;
  }
  const size =
    report.objectBytes > 0
      ? `${report.objects} × ${formatBytes(report.objectBytes)}`
      : `${report.objects}`;
  const rss =
    report.serverPeakRssBytes === null
      ? '–'
      : formatBytes(report.serverPeakRssBytes) +
        (report.serverPeakPssBytes === null ? '' : ` (${formatBytes(report.serverPeakPssBytes)})`);
  return [
    '',
    report.name,
    'ok',
    size,
    report.concurrency,
    throughputText(report),
    fixed(report.latencyMsP50, 1),
    fixed(report.latencyMsP99, 1),
    fixed(report.serverCpuSecondsPerGB, 2),
    fixed(report.clientCpuSecondsPerGB, 2),
    rss,
    ratioText(report),
    '',
  ]
    .join(' | ')
    .trim();
}

const SCENARIO_HEADER = [
  '| scenario | status | objects | conc. | throughput | p50 ms | p99 ms | server CPU-s/GB ' +
    '| client CPU-s/GB | server peak RSS (PSS) | ratio to limit |',
  '|---|---|---|---|---|---|---|---|---|---|---|',
];

/** The machine line that heads every generated report. */
export function machineLine(m: MachineInfo): string {
  return (
    `Machine: ${m.cpuModel}, ${m.cores} cores, ${formatBytes(m.memoryBytes)} RAM, ${m.os}, ` +
    `Node ${m.node}, load average at start ${m.loadAverage.join(' / ')}. ` +
    `Lightwell ${m.lightwell}, ${m.uWebSockets}. ` +
    `Data directory on ${m.filesystem.type} (${m.filesystem.mount}).`
  );
}

function failureLines(report: BenchReport): string[] {
  const failed = report.scenarios.filter((s) => s.status === 'failed');
  if (failed.length === 0 && report.limitFailures.length === 0) return [];
  const lines = ['## Failures', ''];
  for (const f of report.limitFailures) lines.push(`- limit ${f.replace(/\s+/g, ' ')}`);
  for (const s of failed) {
    for (const f of s.failures) lines.push(`- ${s.name}: ${f.replace(/\s+/g, ' ')}`);
  }
  lines.push('');
  return lines;
}

/** Each scenario's notes, and which ran on another client than the run's (settings.client). */
function noteLines(report: BenchReport): string[] {
  const chosen = report.settings['client'];
  const notes = report.scenarios.flatMap((s) => [
    ...s.notes.map((note) => `- ${s.name}: ${note}`),
    ...(s.client !== null && chosen !== undefined && s.client !== chosen
      ? [`- ${s.name}: ran on the ${s.client} client`]
      : []),
  ]);
  return notes.length === 0 ? [] : [...notes, ''];
}

export function renderMarkdown(report: BenchReport): string {
  const settings = Object.entries(report.settings).map(([k, v]) => `${k}=${String(v)}`);
  return [
    '# Lightwell benchmark results',
    '',
    `Generated ${report.generatedAt} by \`npm run bench\` (bench/run.ts); do not edit by hand.`,
    '',
    machineLine(report.machine),
    '',
    `Settings: ${settings.join(', ')}.`,
    '',
    '## Scenarios',
    '',
    ...(report.scenarios.length === 0
      ? ['No scenario ran (`--limits-only`).']
      : [...SCENARIO_HEADER, ...report.scenarios.map(scenarioRow)]),
    '',
    ...noteLines(report),
    '## Limits of this machine, measured in the same run',
    '',
    '| limit | value | how |',
    '|---|---|---|',
    ...report.limits.map((l) => `| ${l.name} | ${amount(l.value)} ${l.unit} | ${l.detail ?? ''} |`),
    '',
    ...failureLines(report),
  ].join('\n');
}

function escapeXml(text: string): string {
  return text.replace(/[<>&"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

const CHART = { width: 960, labelWidth: 190, barWidth: 500, rowHeight: 22, top: 56 } as const;

function chartBar(report: ScenarioReport, row: number, x: (ratio: number) => number): string[] {
  const ratio = report.ratios[0];
  if (ratio === undefined) return [];
  const { labelWidth, rowHeight } = CHART;
  const y = CHART.top + row * rowHeight;
  const end = x(ratio.value);
  const name = escapeXml(report.name);
  const fill = ratio.value >= 1 ? '#2a9d8f' : '#457b9d';
  const label = `${ratio.value.toFixed(2)} of ${ratio.limit} (${throughputText(report)})`;
  return [
    `<text x="${labelWidth - 8}" y="${y + 15}" text-anchor="end">${name}</text>`,
    `<rect x="${labelWidth}" y="${y + 4}" width="${Math.max(1, end - labelWidth).toFixed(1)}" ` +
      `height="${rowHeight - 8}" fill="${fill}"/>`,
    `<text x="${(end + 6).toFixed(1)}" y="${y + 15}">${escapeXml(label)}</text>`,
  ];
}

/** Horizontal bars of each scenario's ratio to its primary limit, with a line at 1.0. */
export function renderSvg(report: BenchReport): string {
  const rows = report.scenarios.filter((s) => s.ratios[0] !== undefined);
  const { width, labelWidth, barWidth, rowHeight, top } = CHART;
  const height = top + Math.max(1, rows.length) * rowHeight + 30;
  const scaleMax = Math.max(1, ...rows.map((s) => s.ratios[0]?.value ?? 0)) * 1.05;
  const x = (ratio: number): number => labelWidth + (ratio / scaleMax) * barWidth;
  const m = report.machine;
  const title =
    `Lightwell ${m.lightwell}: throughput as a fraction of the machine limit ` + 'that bounds it';
  const subtitle =
    `${m.cpuModel}, ${m.cores} cores, Node ${m.node}, ` +
    `${String(report.settings['profile'] ?? '')} profile, ${report.generatedAt}`;
  const one = x(1).toFixed(1);
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" ` +
      `viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    `<text x="10" y="20" font-size="15" font-weight="bold">${escapeXml(title)}</text>`,
    `<text x="10" y="38" fill="#555">${escapeXml(subtitle)}</text>`,
    ...rows.flatMap((s, row) => chartBar(s, row, x)),
    `<line x1="${one}" y1="${top - 4}" x2="${one}" y2="${height - 24}" stroke="#e63946" ` +
      'stroke-dasharray="4 3"/>',
    `<text x="${one}" y="${height - 10}" text-anchor="middle" fill="#e63946">` +
      '1.0 = the limit</text>',
    '</svg>',
    '',
  ].join('\n');
}

export function writeReports(outDir: string, report: BenchReport): string[] {
  return writeFiles(outDir, [
    ['results.json', `${JSON.stringify(report, null, 2)}\n`],
    ['results.md', renderMarkdown(report)],
    ['chart.svg', renderSvg(report)],
  ]);
}

/** Writes generated files (name, text) into `outDir`, created if missing; returns their paths. */
export function writeFiles(
  outDir: string,
  files: readonly (readonly [string, string])[],
): string[] {
  mkdirSync(outDir, { recursive: true });
  return files.map(([name, text]) => {
    const path = join(outDir, name);
    writeFileSync(path, text);
    return path;
  });
}
