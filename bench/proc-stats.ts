// CPU time and resident memory of a process tree, read from /proc (Linux).
//
// The tree is the root process and all of its descendants, found through
// /proc/<pid>/task/<tid>/children (or, where the kernel lacks that file, by scanning every
// /proc/<pid>/stat for its parent). CPU is utime + stime of each live process plus cutime +
// cstime, which hold the time of children that already exited and were reaped, so a restarted
// child's time is not lost and no time is counted twice. RSS is the sum of VmRSS over the tree;
// its peak is the largest sum seen by a sampler running every `intervalMs`. That sum counts a
// page shared by several processes (the LMDB index that engine, gateways and admin all map)
// once per process, so the tree's PSS (each shared page divided among the processes that map
// it, from /proc/<pid>/smaps_rollup) is sampled too: it is the memory the service really uses.
// Reading smaps_rollup makes the kernel walk every mapping of the process (about 5 ms for a
// Lightwell process with its LMDB map; at 10 samples a second over four processes that was a
// fifth of a core taken from the service under test), so PSS is sampled once a second and at
// the window's ends, while CPU and RSS keep the short interval.
//
// The figures the service's memory bound is checked against (docs/benchmarks.md, "How the RSS
// of several processes is summed"): the processes' own pages (RssAnon + RssShmem from
// /proc/<pid>/status, as cheap to read as VmRSS) summed, `ownBytes`; and beside it the same with
// the largest RssFile of any one process added, `onceBytes`, the RSS sum with shared file pages
// counted once (every process maps the same files, node's binary and the LMDB index, whose
// pages are the page cache of the index and grow with it, not with what the service holds).

import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

export interface TreeSample {
  readonly processes: number;
  readonly cpuSeconds: number;
  readonly rssBytes: number;
  /** Null where the kernel has no smaps_rollup. */
  readonly pssBytes: number | null;
  /** The processes' own pages summed, and that with shared file pages once (the header). */
  readonly ownBytes: number;
  readonly onceBytes: number;
}

export interface TreeWindow {
  readonly cpuSeconds: number;
  readonly peakRssBytes: number;
  readonly peakPssBytes: number | null;
  /** The peaks of `TreeSample.ownBytes` and `onceBytes`. */
  readonly peakOwnBytes: number;
  readonly peakOnceBytes: number;
  readonly processesMax: number;
}

let clockTicks: number | null = null;

function ticksPerSecond(): number {
  if (clockTicks === null) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

function readText(path: string): string | null {
  try {
    return readFileSync(path, 'latin1');
  } catch {
    return null;
  }
}

/** utime + stime + cutime + cstime in clock ticks, and the parent pid; null if gone. */
function readStat(pid: number): { ticks: number; ppid: number } | null {
  const text = readText(`/proc/${pid}/stat`);
  if (text === null) return null;
  // The command name may contain spaces and parentheses: fields start after the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const field = (n: number): number => Number(fields[n - 3] ?? 0);
  return { ticks: field(14) + field(15) + field(16) + field(17), ppid: field(4) };
}

/** VmRSS, the process's own pages (RssAnon + RssShmem) and its file pages (RssFile). */
function readRss(pid: number): { rss: number; own: number; file: number } {
  const text = readText(`/proc/${pid}/status`);
  const kib = (name: string): number => {
    const match = text === null ? null : new RegExp(`^${name}:\\s+(\\d+)\\s+kB`, 'm').exec(text);
    return match ? Number(match[1]) * 1024 : 0;
  };
  return { rss: kib('VmRSS'), own: kib('RssAnon') + kib('RssShmem'), file: kib('RssFile') };
}

function readPssBytes(pid: number): number | null {
  const text = readText(`/proc/${pid}/smaps_rollup`);
  const match = text === null ? null : /^Pss:\s+(\d+)\s+kB/m.exec(text);
  return match ? Number(match[1]) * 1024 : null;
}

function childrenOf(pid: number): number[] | null {
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  const children: number[] = [];
  for (const task of tasks) {
    const text = readText(`/proc/${pid}/task/${task}/children`);
    if (text === null) return null;
    for (const word of text.split(' ')) if (word !== '') children.push(Number(word));
  }
  return children;
}

/** Every pid in the tree under `root` (inclusive). */
export function processTree(root: number): number[] {
  const tree: number[] = [];
  const queue = [root];
  let scanned: Map<number, number[]> | null = null;
  while (queue.length > 0) {
    const pid = queue.shift() ?? root;
    tree.push(pid);
    let children = childrenOf(pid);
    if (children === null) {
      scanned ??= scanParents();
      children = scanned.get(pid) ?? [];
    }
    queue.push(...children);
  }
  return tree;
}

/** Fallback when /proc/<pid>/task/<tid>/children is missing: parent → children for all. */
function scanParents(): Map<number, number[]> {
  const byParent = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const stat = readStat(Number(name));
    if (stat === null) continue;
    const list = byParent.get(stat.ppid) ?? [];
    list.push(Number(name));
    byParent.set(stat.ppid, list);
  }
  return byParent;
}

/** One sample of the tree (PSS only when asked); null when the root process no longer exists. */
export function sampleProcessTree(root: number, withPss = true): TreeSample | null {
  if (readStat(root) === null) return null;
  let ticks = 0;
  let rssBytes = 0;
  let pssBytes: number | null = 0;
  let processes = 0;
  let ownBytes = 0;
  let fileBytesMax = 0;
  for (const pid of processTree(root)) {
    const stat = readStat(pid);
    if (stat === null) continue;
    ticks += stat.ticks;
    const rss = readRss(pid);
    rssBytes += rss.rss;
    ownBytes += rss.own;
    fileBytesMax = Math.max(fileBytesMax, rss.file);
    if (withPss) {
      const pss = readPssBytes(pid);
      pssBytes = pss === null || pssBytes === null ? null : pssBytes + pss;
    }
    processes += 1;
  }
  return {
    processes,
    cpuSeconds: ticks / ticksPerSecond(),
    rssBytes,
    pssBytes: withPss ? pssBytes : null,
    ownBytes,
    onceBytes: ownBytes + fileBytesMax,
  };
}

const PSS_INTERVAL_MS = 1000;

/** Samples a tree periodically and reports CPU seconds and peak RSS over a window. */
export class TreeMonitor {
  private timer: NodeJS.Timeout | null = null;
  private startCpu = 0;
  private lastCpu = 0;
  private peakRss = 0;
  private peakPss: number | null = 0;
  private peakOwn = 0;
  private peakOnce = 0;
  private processesMax = 0;
  private pssSampledAt = 0;

  constructor(
    readonly root: number,
    private readonly intervalMs = 100,
  ) {}

  /** Starts a new window now. */
  begin(): void {
    this.stopTimer();
    const sample = sampleProcessTree(this.root);
    this.startCpu = sample?.cpuSeconds ?? 0;
    this.lastCpu = this.startCpu;
    this.peakRss = sample?.rssBytes ?? 0;
    this.peakPss = sample ? sample.pssBytes : 0;
    this.peakOwn = sample?.ownBytes ?? 0;
    this.peakOnce = sample?.onceBytes ?? 0;
    this.processesMax = sample?.processes ?? 0;
    this.pssSampledAt = performance.now();
    this.timer = setInterval(() => this.sample(), this.intervalMs);
    this.timer.unref();
  }

  /** Ends the window and returns what it saw. */
  end(): TreeWindow {
    this.stopTimer();
    this.sample(true);
    return {
      cpuSeconds: Math.max(0, this.lastCpu - this.startCpu),
      peakRssBytes: this.peakRss,
      peakPssBytes: this.peakPss,
      peakOwnBytes: this.peakOwn,
      peakOnceBytes: this.peakOnce,
      processesMax: this.processesMax,
    };
  }

  private sample(forcePss = false): void {
    const now = performance.now();
    const withPss = forcePss || now - this.pssSampledAt >= PSS_INTERVAL_MS;
    if (withPss) this.pssSampledAt = now;
    const sample = sampleProcessTree(this.root, withPss);
    if (sample === null) return;
    // A restarted child loses its own time from the tree until it is reaped: never go back.
    this.lastCpu = Math.max(this.lastCpu, sample.cpuSeconds);
    this.peakRss = Math.max(this.peakRss, sample.rssBytes);
    this.peakOwn = Math.max(this.peakOwn, sample.ownBytes);
    this.peakOnce = Math.max(this.peakOnce, sample.onceBytes);
    if (withPss)
      this.peakPss =
        this.peakPss === null || sample.pssBytes === null
          ? null
          : Math.max(this.peakPss, sample.pssBytes);
    this.processesMax = Math.max(this.processesMax, sample.processes);
  }

  private stopTimer(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }
}
