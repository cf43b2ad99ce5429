// Scrub jobs: a checksum scrub of a tenant (or one bucket) that runs in the background with
// progress, can be watched and cancelled, and lists the objects whose chunks fail.
//
// The engine does the work: its read-only `scrubTenantChunks` command (engine/ops/tenant-scrub.ts)
// verifies a bounded slice of chunk references per call and returns a cursor; this module only
// drives the cursor, one call at a time, and keeps the job's state. The admin process never
// reads a segment and never writes the index. A job first counts what it will read (a pass that
// reads only the index), so its progress is the share of chunk references verified.
//
// Jobs live in the admin process's memory: a restart of the admin process ends the jobs running
// and forgets the finished ones (a scrub changes nothing, so nothing is left half done; start it
// again). At most one job runs per tenant and SCRUB_JOBS_RUNNING_MAX at once; the newest
// SCRUB_JOBS_KEPT are kept, and each lists at most SCRUB_FINDINGS_MAX corrupt chunks (all are
// counted).

import { randomBytes } from 'node:crypto';
import type { EngineClient } from '../engine/protocol.js';
import type {
  CorruptChunk,
  ScrubArgs,
  ScrubCursor,
  ScrubResult,
} from '../engine/ops/tenant-scrub.js';
import { Conflict, errorCode } from '../util/errors.js';

export const SCRUB_JOBS_RUNNING_MAX = 2;
export const SCRUB_JOBS_KEPT = 50;
export const SCRUB_FINDINGS_MAX = 1000;

export type ScrubState = 'counting' | 'running' | 'complete' | 'cancelled' | 'failed';

export interface ScrubCounts {
  buckets: number;
  versions: number;
  chunkRefs: number;
  logicalBytes: number;
  chunksVerified: number;
  bytesVerified: number;
  corruptChunks: number;
}

export interface ScrubJob {
  readonly id: string;
  readonly tenantId: string;
  readonly bucket?: string;
  readonly startedBy: string;
  readonly startedAt: number;
  state: ScrubState;
  finishedAt?: number;
  /** What the job will read: chunk references, versions and logical bytes (the first pass). */
  planned: { versions: number; chunkRefs: number; logicalBytes: number };
  counts: ScrubCounts;
  corrupt: CorruptChunk[];
  error?: string;
  cancelRequested: boolean;
}

export function zeroCounts(): ScrubCounts {
  return {
    buckets: 0,
    versions: 0,
    chunkRefs: 0,
    logicalBytes: 0,
    chunksVerified: 0,
    bytesVerified: 0,
    corruptChunks: 0,
  };
}

const FINISHED: ReadonlySet<ScrubState> = new Set(['complete', 'cancelled', 'failed']);

export function isFinished(job: ScrubJob): boolean {
  return FINISHED.has(job.state);
}

/** Runs the engine's scrub over a tenant or bucket to the end, one bounded call at a time. */
export async function scrubPass(
  engine: EngineClient,
  target: { tenantId: string; bucket?: string | undefined },
  verify: boolean,
  onStep: (step: ScrubResult) => boolean,
): Promise<boolean> {
  let cursor: ScrubCursor | undefined;
  do {
    const request: ScrubArgs = { tenantId: target.tenantId, verify };
    if (target.bucket !== undefined) request.bucket = target.bucket;
    if (cursor !== undefined) request.cursor = cursor;
    const step = await engine.call('scrubTenantChunks', request);
    if (!onStep(step)) return false;
    cursor = step.cursor ?? undefined;
  } while (cursor !== undefined);
  return true;
}

export class ScrubJobs {
  private readonly jobs = new Map<string, ScrubJob>();

  constructor(private readonly engine: EngineClient) {}

  /** Newest first; only `tenantId`'s when given. */
  list(tenantId?: string): ScrubJob[] {
    return [...this.jobs.values()]
      .filter((job) => tenantId === undefined || job.tenantId === tenantId)
      .reverse();
  }

  get(id: string): ScrubJob | undefined {
    return this.jobs.get(id);
  }

  /** Starts a job (409 while one runs for the tenant or too many run). */
  start(target: { tenantId: string; bucket?: string | undefined }, startedBy: string): ScrubJob {
    const running = [...this.jobs.values()].filter((job) => !isFinished(job));
    const same = running.find((job) => job.tenantId === target.tenantId);
    if (same) throw Conflict(`scrub ${same.id} of tenant ${target.tenantId} is still running`);
    if (running.length >= SCRUB_JOBS_RUNNING_MAX)
      throw Conflict(`${String(running.length)} scrubs are running; wait for one to finish`);
    const job: ScrubJob = {
      id: `scrub_${randomBytes(8).toString('hex')}`,
      tenantId: target.tenantId,
      ...(target.bucket === undefined ? {} : { bucket: target.bucket }),
      startedBy,
      startedAt: Date.now(),
      state: 'counting',
      planned: { versions: 0, chunkRefs: 0, logicalBytes: 0 },
      counts: zeroCounts(),
      corrupt: [],
      cancelRequested: false,
    };
    this.jobs.set(job.id, job);
    this.forgetOld();
    void this.run(job);
    return job;
  }

  /** Asks a running job to stop after its current step; a finished job stays as it is. */
  cancel(job: ScrubJob): ScrubJob {
    if (!isFinished(job)) job.cancelRequested = true;
    return job;
  }

  private async run(job: ScrubJob): Promise<void> {
    const target = { tenantId: job.tenantId, bucket: job.bucket };
    try {
      const counted = await scrubPass(this.engine, target, false, (step) => {
        job.planned.versions += step.versions;
        job.planned.chunkRefs += step.chunkRefs;
        job.planned.logicalBytes += step.logicalBytes;
        return !job.cancelRequested;
      });
      if (counted) job.state = 'running';
      const done =
        counted &&
        (await scrubPass(this.engine, target, true, (step) => {
          for (const field of Object.keys(job.counts) as Array<keyof ScrubCounts>)
            job.counts[field] += step[field];
          for (const entry of step.corrupt)
            if (job.corrupt.length < SCRUB_FINDINGS_MAX) job.corrupt.push(entry);
          return !job.cancelRequested;
        }));
      job.state = done ? 'complete' : 'cancelled';
    } catch (error) {
      job.state = 'failed';
      job.error = `${errorCode(error) ?? 'internal'}: ${error instanceof Error ? error.message : String(error)}`;
    }
    job.finishedAt = Date.now();
  }

  private forgetOld(): void {
    for (const job of this.jobs.values()) {
      if (this.jobs.size <= SCRUB_JOBS_KEPT) return;
      if (isFinished(job)) this.jobs.delete(job.id);
    }
  }
}
