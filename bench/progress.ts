// Progress on stderr: a redrawn bar when stderr is a terminal, plain lines otherwise (CI logs).
//
// A task has a label, a total and a unit (bytes or operations). On a TTY the bar is redrawn at
// most ten times a second with the done fraction, the rate so far and the elapsed time; in a log
// the task prints one line when it starts, one every 10 s, and one when it ends. Results go to
// stdout, never here, so `npm run bench > results.txt` still shows progress.

import { performance } from 'node:perf_hooks';

export type ProgressUnit = 'bytes' | 'ops';

const BAR_WIDTH = 28;
const REDRAW_MS = 100;
const LOG_EVERY_MS = 10_000;

export interface ProgressStream {
  readonly isTTY?: boolean;
  write(text: string): unknown;
}

export class Progress {
  private label = '';
  private total = 0;
  private unit: ProgressUnit = 'ops';
  private started = 0;
  private lastDraw = 0;
  private lastDone = 0;
  private active = false;

  constructor(private readonly stream: ProgressStream = process.stderr) {}

  private get tty(): boolean {
    return this.stream.isTTY === true;
  }

  begin(label: string, total: number, unit: ProgressUnit): void {
    this.end();
    this.label = label;
    this.total = total;
    this.unit = unit;
    this.started = performance.now();
    this.lastDraw = this.started;
    this.lastDone = 0;
    this.active = true;
    if (this.tty) this.draw(0);
    else this.stream.write(`${label}: started (${formatAmount(total, unit)})\n`);
  }

  update(done: number): void {
    if (!this.active) return;
    this.lastDone = done;
    const now = performance.now();
    if (now - this.lastDraw < (this.tty ? REDRAW_MS : LOG_EVERY_MS)) return;
    this.lastDraw = now;
    if (this.tty) this.draw(done);
    else this.stream.write(`${this.label}: ${this.describe(done)}\n`);
  }

  /** Ends the task with a one-line summary. */
  end(summary?: string): void {
    if (!this.active) return;
    this.active = false;
    const line = `${this.label}: ${summary ?? 'done'}`;
    this.stream.write(this.tty ? `\r\x1b[2K${line}\n` : `${line}\n`);
  }

  /** A line outside any task (clears the bar first). */
  note(line: string): void {
    this.stream.write(this.tty && this.active ? `\r\x1b[2K${line}\n` : `${line}\n`);
    if (this.active && this.tty) this.draw(this.lastDone);
  }

  private describe(done: number): string {
    const seconds = (performance.now() - this.started) / 1000;
    const fraction = this.total > 0 ? Math.min(1, done / this.total) : 0;
    const rate = seconds > 0 ? done / seconds : 0;
    const rateText =
      this.unit === 'bytes' ? `${(rate / 1e6).toFixed(0)} MB/s` : `${rate.toFixed(0)}/s`;
    return `${(fraction * 100).toFixed(0).padStart(3)}% ${rateText} ${seconds.toFixed(1)}s`;
  }

  private draw(done: number): void {
    const fraction = this.total > 0 ? Math.min(1, done / this.total) : 0;
    const filled = Math.round(fraction * BAR_WIDTH);
    const bar = '#'.repeat(filled) + '-'.repeat(BAR_WIDTH - filled);
    this.stream.write(`\r\x1b[2K${this.label} [${bar}] ${this.describe(done)}`);
  }
}

export function formatAmount(amount: number, unit: ProgressUnit): string {
  if (unit === 'ops') return `${amount} requests`;
  return formatBytes(amount);
}

export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let index = 0;
  while (value >= 1024 && index < units.length - 1) {
    value /= 1024;
    index += 1;
  }
  const digits = value >= 100 || index === 0 ? 0 : 1;
  return `${value.toFixed(digits).replace(/\.0$/, '')} ${units[index] ?? 'B'}`;
}
