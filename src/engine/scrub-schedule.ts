// Scheduled scrubs: a checksum scrub of one tenant, or of every tenant, repeated at a fixed
// interval by the engine in the background, with the last run's counts and findings kept in the
// index for the console to show.
//
// Invariants:
// - A schedule is one `meta` row, `scrub-schedule\0<target>` where the target is a tenant id or
//   `*` (every active tenant). `setScrubSchedule` writes or removes it in one transaction with
//   its audit row; its first run is due one interval later (or at once with `runNow`).
// - The scheduler reads the engine's clock (injected; tests move it by hand). A run is the same
//   read-only `scrubTenantChunks` as the console's scrub jobs, one bounded call at a time with
//   the event loop free in between. Its outcome and the next due time are written in one
//   transaction when it ends. A run cut by a crash or a stop left nothing to undo (a scrub
//   writes nothing) and its schedule is still due, so the next start runs it again.
// - One run at a time, schedules in the order they fell due. A run lists at most
//   SCHEDULED_FINDINGS_MAX corrupt chunks and counts all of them.
//
// Persists: the schedule rows described above (docs/on-disk-format.md §5, `meta`).

import { Buffer } from 'node:buffer';
import { DB, tenantKey, type TenantRecord } from './index/schema.js';
import { reportCorruptChunk } from './ops/corrupt-chunks.js';
import type { EngineContext } from './ops/context.js';
import { scrubTenantChunks, type CorruptChunk, type ScrubCursor } from './ops/tenant-scrub.js';
import { requireTenant } from './ops/control.js';
import { validateTenantId } from '../security/names.js';
import { BadRequest, NotFound, errorCode } from '../util/errors.js';
import type { Logger } from '../util/log.js';

export const SCRUB_SCHEDULE_PREFIX = 'scrub-schedule\0';
/** The target of a schedule over every active tenant. */
export const ALL_TENANTS = '*';
export const SCRUB_INTERVAL_HOURS_MIN = 1;
export const SCRUB_INTERVAL_HOURS_MAX = 24 * 366;
export const SCHEDULED_FINDINGS_MAX = 100;
const HOUR_MS = 3_600_000;
const POLL_MS = 60_000;

export interface ScheduledScrubRun {
  startedAt: number;
  finishedAt: number;
  state: 'complete' | 'failed' | 'stopped';
  tenants: number;
  versions: number;
  chunksVerified: number;
  bytesVerified: number;
  corruptChunks: number;
  corrupt: Array<CorruptChunk & { tenantId: string }>;
  error?: string;
}

export interface ScrubScheduleRecord {
  target: string;
  intervalHours: number;
  nextRunAt: number;
  createdAt: number;
  updatedAt: number;
  lastRun?: ScheduledScrubRun;
}

export function scheduleKey(target: string): Buffer {
  return Buffer.from(SCRUB_SCHEDULE_PREFIX + target, 'utf8');
}

/** Every schedule, the global one first. */
export function scrubSchedules(context: Pick<EngineContext, 'store'>): ScrubScheduleRecord[] {
  const start = Buffer.from(SCRUB_SCHEDULE_PREFIX, 'utf8');
  const end = Buffer.concat([start, Buffer.from([0xff])]);
  return [...context.store.range<ScrubScheduleRecord>(DB.meta, { start, end })].map(
    (entry) => entry.value,
  );
}

/** The run's findings, in the corrupt-chunk records (ops/corrupt-chunks.ts), in its commit. */
function recordFindings(
  context: EngineContext,
  findings: ReadonlyArray<CorruptChunk & { tenantId: string }>,
): void {
  for (const finding of findings) {
    const tenant = context.store.get<TenantRecord>(DB.tenants, tenantKey(finding.tenantId));
    if (!tenant || finding.segmentId === undefined || finding.offset === undefined) continue;
    reportCorruptChunk(context, {
      tenantNum: tenant.num,
      chunkId: finding.chunkId,
      segmentId: finding.segmentId,
      offset: finding.offset,
      reason: finding.problem,
      foundBy: 'scrub',
    });
  }
}

function checkTarget(context: EngineContext, target: unknown): string {
  if (target === ALL_TENANTS) return target;
  if (typeof target !== 'string') throw BadRequest('target must be a tenant id or *');
  validateTenantId(target);
  requireTenant(context, target);
  return target;
}

/**
 * Sets (or, with `intervalHours` null, removes) the schedule of `target`. Keeps the last run;
 * the next run is due one interval from now, or now with `runNow`.
 */
export function setScrubSchedule(
  context: EngineContext,
  args: { target: unknown; intervalHours: unknown; runNow?: unknown; dryRun?: boolean },
): ScrubScheduleRecord | null {
  const target = checkTarget(context, args.target);
  const key = scheduleKey(target);
  const existing = context.store.get<ScrubScheduleRecord>(DB.meta, key);
  if (args.intervalHours === null) {
    if (!existing) throw NotFound(`no scrub schedule for ${target}`);
    if (args.dryRun !== true) context.store.remove(DB.meta, key);
    return null;
  }
  const hours = args.intervalHours;
  if (
    typeof hours !== 'number' ||
    !Number.isInteger(hours) ||
    hours < SCRUB_INTERVAL_HOURS_MIN ||
    hours > SCRUB_INTERVAL_HOURS_MAX
  )
    throw BadRequest(
      `intervalHours must be a whole number from ${SCRUB_INTERVAL_HOURS_MIN} to ` +
        `${SCRUB_INTERVAL_HOURS_MAX}, or null to remove the schedule`,
    );
  const now = context.now();
  const record: ScrubScheduleRecord = {
    target,
    intervalHours: hours,
    nextRunAt: args.runNow === true ? now : now + hours * HOUR_MS,
    createdAt: existing?.createdAt ?? now,
    updatedAt: now,
    ...(existing?.lastRun === undefined ? {} : { lastRun: existing.lastRun }),
  };
  if (args.dryRun !== true) {
    context.store.put(DB.meta, key, record);
    for (const wake of wakers) queueMicrotask(wake);
  }
  return record;
}

const wakers = new Set<() => void>();

/** Runs the schedules that are due, in the background, on the engine's clock. */
export class ScrubScheduler {
  private running: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly options: { context: EngineContext; log: Logger; pollMs?: number }) {}

  start(): void {
    wakers.add(this.wake);
    this.timer = setInterval(this.wake, this.options.pollMs ?? POLL_MS);
    this.timer.unref();
    this.wake();
  }

  readonly wake = (): void => {
    if (this.stopped) return;
    this.running ??= this.runDue()
      .then(
        () => undefined,
        (error: unknown) =>
          this.options.log.error(
            { err: error },
            'scheduled scrub failed; retrying on the next poll',
          ),
      )
      .finally(() => {
        this.running = undefined;
      });
  };

  /** Runs every schedule due now, one after another (also what tests call). */
  async runDue(): Promise<number> {
    const { context, log } = this.options;
    let ran = 0;
    for (;;) {
      // Read in a transaction of its own: it queues behind the command that woke the
      // scheduler, so a schedule set a moment ago is seen.
      const schedules = await context.store.transact(() => scrubSchedules(context));
      const now = context.now();
      const due = schedules
        .filter((schedule) => schedule.nextRunAt <= now)
        .sort((a, b) => a.nextRunAt - b.nextRunAt)[0];
      if (!due || this.stopped) return ran;
      const run = await this.runOne(due.target);
      if (this.isStopped()) return ran; // a cut run stays due: the next start runs it
      await context.store.transact(() => {
        const current = context.store.get<ScrubScheduleRecord>(DB.meta, scheduleKey(due.target));
        if (!current) return; // removed while it ran
        const next = run.finishedAt + current.intervalHours * HOUR_MS;
        context.store.put(DB.meta, scheduleKey(due.target), {
          ...current,
          // Changed while it ran: the operator's due time stands.
          nextRunAt: current.updatedAt !== due.updatedAt ? current.nextRunAt : next,
          lastRun: run,
        });
        recordFindings(context, run.corrupt);
      });
      ran += 1;
      if (run.corruptChunks > 0)
        log.error(
          { target: due.target, corrupt: run.corruptChunks },
          'scheduled scrub found damage',
        );
      else log.info({ target: due.target, chunks: run.chunksVerified }, 'scheduled scrub clean');
    }
  }

  private async runOne(target: string): Promise<ScheduledScrubRun> {
    const { context } = this.options;
    const run: ScheduledScrubRun = {
      startedAt: context.now(),
      finishedAt: 0,
      state: 'complete',
      tenants: 0,
      versions: 0,
      chunksVerified: 0,
      bytesVerified: 0,
      corruptChunks: 0,
      corrupt: [],
    };
    const tenants =
      target === ALL_TENANTS
        ? [...context.store.range<TenantRecord>(DB.tenants, {})]
            .map((entry) => entry.value)
            .filter((tenant) => tenant.state === 'active')
            .map((tenant) => tenant.id)
        : [target];
    try {
      for (const tenantId of tenants) {
        if (this.stopped) break;
        await this.scrubTenant(tenantId, run);
        run.tenants += 1;
      }
      if (this.stopped) run.state = 'stopped';
    } catch (error) {
      run.state = 'failed';
      run.error = `${errorCode(error) ?? 'internal'}: ${error instanceof Error ? error.message : String(error)}`;
    }
    run.finishedAt = context.now();
    return run;
  }

  private async scrubTenant(tenantId: string, run: ScheduledScrubRun): Promise<void> {
    let cursor: ScrubCursor | undefined;
    do {
      const step = await scrubTenantChunks(this.options.context, {
        tenantId,
        verify: true,
        ...(cursor === undefined ? {} : { cursor }),
      });
      run.versions += step.versions;
      run.chunksVerified += step.chunksVerified;
      run.bytesVerified += step.bytesVerified;
      run.corruptChunks += step.corruptChunks;
      for (const entry of step.corrupt)
        if (run.corrupt.length < SCHEDULED_FINDINGS_MAX) run.corrupt.push({ ...entry, tenantId });
      cursor = step.cursor;
      await new Promise((resolve) => setImmediate(resolve));
    } while (cursor !== undefined && !this.stopped);
  }

  /** Read afresh after an await (a stop may have come in meanwhile). */
  private isStopped(): boolean {
    return this.stopped;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    wakers.delete(this.wake);
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }
}
