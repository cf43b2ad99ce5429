// Results of the peer comparison (peers.ts): peers.json (everything, for tools) and peers.md
// (a table per measurement with every target's throughput, latency, server CPU and memory, and
// Lightwell's throughput and CPU as ratios to each peer's), both generated into the output
// directory with the machine and the settings of the run. Edit this module, not them.
//
// The table of facts comes first: the targets do not do the same work for a PUT (Lightwell
// answers after fdatasync, encrypts and checksums, and keeps an index; the peers do not), and
// the numbers mean nothing without it.

import type { PeerFacts, PeerName } from './peer-targets.js';
import { formatBytes } from './progress.js';
import {
  amount,
  fixed,
  machineLine,
  type ReportHeader,
  type ScenarioReport,
  writeFiles,
} from './report.js';

export interface PeerRun {
  readonly name: PeerName;
  readonly title: string;
  readonly version: string | null;
  readonly facts: PeerFacts;
  /** Skipped: a peer that could not be installed or started. */
  readonly status: 'ok' | 'failed' | 'skipped';
  readonly reason?: string;
  readonly measurements: readonly ScenarioReport[];
}

export interface PeersReport extends ReportHeader {
  /** The measurements, in order: every target ran these. */
  readonly measurements: readonly { readonly name: string; readonly title: string }[];
  readonly targets: readonly PeerRun[];
  readonly ok: boolean;
}

const FACT_COLUMNS: readonly (readonly [keyof PeerFacts, string])[] = [
  ['durability', 'before the PUT is answered'],
  ['integrity', 'checksums'],
  ['encryption', 'encryption'],
  ['index', 'index'],
  ['reads', 'GETs read'],
  ['auth', 'auth'],
];

function factLines(report: PeersReport): string[] {
  const names = FACT_COLUMNS.map(([, name]) => name);
  return [
    `| target | version | ${names.join(' | ')} |`,
    `|---|---|${names.map(() => '---|').join('')}`,
    ...report.targets.map((target) => {
      const facts = FACT_COLUMNS.map(([key]) => target.facts[key]);
      return `| ${target.title} | ${target.version ?? '–'} | ${facts.join(' | ')} |`;
    }),
  ];
}

/** Server CPU per unit of the throughput: seconds per GB moved, or µs per request. */
function cpuPerUnit(report: ScenarioReport): number | null {
  if (report.throughput.unit === 'MB/s') return report.serverCpuSecondsPerGB;
  const cpu = report.serverCpuSeconds;
  return cpu === null || report.operations === 0 ? null : (cpu / report.operations) * 1e6;
}

function cpuText(report: ScenarioReport): string {
  const value = cpuPerUnit(report);
  if (value === null) return '–';
  return report.throughput.unit === 'MB/s' ? `${fixed(value, 2)} s/GB` : `${amount(value)} µs/op`;
}

function ratio(numerator: number | null, denominator: number | null): string {
  if (numerator === null || denominator === null || !(denominator > 0)) return '–';
  return fixed(numerator / denominator, 2);
}

function rssText(report: ScenarioReport): string {
  if (report.serverPeakRssBytes === null) return '–';
  const pss = report.serverPeakPssBytes;
  return formatBytes(report.serverPeakRssBytes) + (pss === null ? '' : ` (${formatBytes(pss)})`);
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').replace(/\|/g, '/');
}

/** One row per target; the ratios are Lightwell's value divided by the row's. */
function measurementRow(target: PeerRun, name: string, lightwell: ScenarioReport | null): string {
  const report = target.measurements.find((m) => m.name === name);
  if (target.status === 'skipped' || report === undefined) {
    return `| ${target.name} | skipped | ${oneLine(target.reason ?? '')} | | | | | | |`;
  }
  if (report.status === 'skipped') {
    return `| ${target.name} | skipped | ${oneLine(report.reason ?? '')} | | | | | | |`;
  }
  if (report.status !== 'ok') {
    const why = oneLine(report.reason ?? report.failures[0] ?? '');
    return `| ${target.name} | **FAILED** | ${why} | | | | | | |`;
  }
  const ok = lightwell?.status === 'ok' ? lightwell : null;
  const cells = [
    target.name,
    'ok',
    `${amount(report.throughput.value)} ${report.throughput.unit}`,
    fixed(report.latencyMsP50, 1),
    fixed(report.latencyMsP99, 1),
    cpuText(report),
    rssText(report),
    ratio(ok?.throughput.value ?? null, report.throughput.value),
    ratio(ok === null ? null : cpuPerUnit(ok), cpuPerUnit(report)),
  ];
  return `| ${cells.join(' | ')} |`;
}

function measurementLines(report: PeersReport): string[] {
  const lightwell = report.targets.find((t) => t.name === 'lightwell');
  return report.measurements.flatMap(({ name, title }) => {
    const reference = lightwell?.measurements.find((m) => m.name === name) ?? null;
    const shape = report.targets
      .flatMap((t) => t.measurements)
      .find((m) => m.name === name && m.status === 'ok');
    const size =
      shape === undefined
        ? ''
        : ` (${shape.objects} × ${formatBytes(shape.objectBytes)}, ` +
          `${shape.concurrency} connection${shape.concurrency === 1 ? '' : 's'})`;
    return [
      `### ${title}${size}`,
      '',
      '| target | status | throughput | p50 ms | p99 ms | server CPU | server peak RSS (PSS) ' +
        '| Lightwell ÷ target, throughput | Lightwell ÷ target, CPU |',
      '|---|---|---|---|---|---|---|---|---|',
      ...report.targets.map((target) => measurementRow(target, name, reference)),
      '',
    ];
  });
}

function failureLines(report: PeersReport): string[] {
  const lines = report.targets.flatMap((target) => [
    ...(target.status === 'failed' && target.measurements.length === 0
      ? [`- ${target.name}: ${oneLine(target.reason ?? '')}`]
      : []),
    ...target.measurements.flatMap((m) =>
      m.failures.map((f) => `- ${target.name} ${m.name}: ${oneLine(f)}`),
    ),
  ]);
  return lines.length === 0 ? [] : ['## Failures', '', ...lines, ''];
}

export function renderPeersMarkdown(report: PeersReport): string {
  const settings = Object.entries(report.settings).map(([k, v]) => `${k}=${String(v)}`);
  return [
    '# Lightwell against peers',
    '',
    `Generated ${report.generatedAt} by \`npm run bench:peers\` (bench/peers.ts); do not edit by ` +
      'hand. Each target ran alone on the machine: started, measured, stopped.',
    '',
    machineLine(report.machine),
    '',
    `Settings: ${settings.join(', ')}.`,
    '',
    '## What each target does',
    '',
    ...factLines(report),
    '',
    '## Measurements',
    '',
    "Server CPU is the CPU time of the target's process tree per GB moved (MB/s rows) or per " +
      'request (ops/s rows). A ratio above 1 means Lightwell has more of it: faster, or more CPU.',
    '',
    ...measurementLines(report),
    ...failureLines(report),
  ].join('\n');
}

export function writePeersReports(outDir: string, report: PeersReport): string[] {
  return writeFiles(outDir, [
    ['peers.json', `${JSON.stringify(report, null, 2)}\n`],
    ['peers.md', renderPeersMarkdown(report)],
  ]);
}
