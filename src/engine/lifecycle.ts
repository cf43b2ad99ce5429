// The lifecycle executor: the engine's background work that acts on bucket lifecycle rules.
//
// A pass first advances the reindex jobs that configuration changes left (ops/lifecycle.ts),
// then reads the due-date index from its start up to the clock's now, a page at a time, and
// submits one command per entry, until a page finds nothing due. So a pass with nothing due
// reads one empty range of `lifecycle-due` (one cursor positioning) whatever the size of the
// buckets, and a pass with N entries due reads N entries, runs N commands and reads
// N / PAGE_MAX + 1 ranges.
//
// Invariants:
// - Work per command is one entry; commands of a page travel through the engine's command
//   batch (the caller's `submit`), so they share group commits with the data plane's commands
//   instead of holding one long write transaction: at most PAGE_MAX entries per page.
// - The index is the state: nothing is kept in memory between passes, so a restart (or a crash
//   mid-pass) resumes from the index, and an entry whose command committed is gone or moved.
// - The clock is injected (`context.now`): tests advance it instead of sleeping.
//
// Persists: nothing itself; its commands do (ops/lifecycle.ts).

import { DB } from './index/schema.js';
import { dueKeyEnd } from './index/lifecycle-schema.js';
import type { EngineContext } from './ops/context.js';
import {
  onLifecycleChange,
  pendingJobs,
  reindexStep,
  runLifecycleEntry,
  type LifecycleOutcome,
} from './ops/lifecycle.js';
import type { Logger } from '../util/log.js';

/** Due entries read and submitted per page. */
export const PAGE_MAX = 128;
/** Pages one pass runs at most before it lets the next pass go on (bounds a pass's length). */
export const PASS_PAGES_MAX = 10_000;

export interface PassStats {
  /** Entries of `lifecycle-due` read. */
  entriesRead: number;
  /** Range reads (cursor positionings) of `lifecycle-due`. */
  rangeReads: number;
  /** Reindex job steps run. */
  reindexSteps: number;
  outcomes: Partial<Record<LifecycleOutcome, number>>;
}

export type Submit = <T>(apply: () => T) => Promise<T>;

export class LifecycleExecutor {
  private running: Promise<PassStats> | undefined;
  /** A configuration changed while a pass ran: run another when it ends. */
  private again = false;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private unsubscribe: (() => void) | undefined;
  /** Totals since start (metrics, tests). */
  readonly totals: PassStats = emptyStats();

  constructor(
    private readonly options: {
      context: EngineContext;
      /** Runs a command in the engine's group commit (CommandBatch.submit). */
      submit: Submit;
      log: Logger;
      /** Milliseconds between passes (`lifecycle.interval`). */
      intervalMs: number;
    },
  ) {}

  start(): void {
    this.unsubscribe = onLifecycleChange(() => {
      if (this.running) this.again = true;
      else void this.runPass();
    });
    this.timer = setInterval(() => void this.runPass(), this.options.intervalMs);
    this.timer.unref();
    void this.runPass();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    if (this.timer) clearInterval(this.timer);
    await this.running?.catch(() => undefined);
  }

  /** One pass; a call while one runs shares it. */
  runPass(): Promise<PassStats> {
    this.running ??= this.pass()
      .catch((error: unknown) => {
        this.options.log.error({ err: error }, 'lifecycle pass failed; retrying at the next one');
        return emptyStats();
      })
      .finally(() => {
        this.running = undefined;
        if (this.again && !this.stopped) {
          this.again = false;
          void this.runPass();
        }
      });
    return this.running;
  }

  private async pass(): Promise<PassStats> {
    const stats = emptyStats();
    const { context, submit, log } = this.options;
    context.store.refresh();
    for (const bucketId of pendingJobs(context)) {
      for (;;) {
        if (this.stopped) return stats;
        const step = await submit(() => reindexStep(context, { bucketId }));
        stats.reindexSteps += 1;
        if (step.done) break;
      }
    }
    for (let page = 0; page < PASS_PAGES_MAX && !this.stopped; page += 1) {
      context.store.refresh();
      const now = context.now();
      const keys: Buffer[] = [];
      stats.rangeReads += 1;
      for (const { key } of context.store.range(DB.lifecycleDue, {
        end: dueKeyEnd(now),
        limit: PAGE_MAX,
      }))
        keys.push(Buffer.from(key));
      stats.entriesRead += keys.length;
      const outcomes = await Promise.allSettled(
        keys.map((dueKey) => submit(() => runLifecycleEntry(context, { dueKey }))),
      );
      for (const outcome of outcomes) {
        if (outcome.status === 'fulfilled')
          stats.outcomes[outcome.value] = (stats.outcomes[outcome.value] ?? 0) + 1;
        else log.error({ err: outcome.reason }, 'lifecycle entry failed; retrying next pass');
      }
      // An action can make another entry due at once (the marker left alone by a noncurrent
      // expiry): read again until a page finds nothing due, or nothing but entries that fail
      // (they stay at the head of the index, and are tried again by the next pass).
      if (outcomes.every((outcome) => outcome.status === 'rejected')) break;
    }
    addStats(this.totals, stats);
    const acted = Object.values(stats.outcomes).reduce((sum, count) => sum + count, 0);
    if (acted > 0 || stats.reindexSteps > 0) log.info(stats, 'lifecycle pass');
    return stats;
  }
}

function emptyStats(): PassStats {
  return { entriesRead: 0, rangeReads: 0, reindexSteps: 0, outcomes: {} };
}

function addStats(into: PassStats, from: PassStats): void {
  into.entriesRead += from.entriesRead;
  into.rangeReads += from.rangeReads;
  into.reindexSteps += from.reindexSteps;
  for (const [name, count] of Object.entries(from.outcomes) as Array<[LifecycleOutcome, number]>)
    into.outcomes[name] = (into.outcomes[name] ?? 0) + count;
}
