// Rebalance jobs (DECISIONS.md "Cluster mode": `POST /cluster/repair/rebalance` answers 200 with
// the report when done within the request, or 202 with `{jobId, state}`, and
// `GET /cluster/repair/jobs/{jobId}` reports it). A rebalance that outlasts ANSWER_MS_MAX keeps
// running here as a job. A job runs until its work ends, however long (no time cap: a scrub of
// a large tenant takes what it takes); while it runs, `progress` shows the figures its work keeps
// up to date.
//
// On a cluster member the job is durable (`durable`: src/cluster/jobs.ts, etcd `jobs/<id>`): its
// record, with the work's arguments and its checkpoint, is stored when it becomes a job, at
// every checkpoint its work reports, and when it ends. A node that starts again resumes its own
// running jobs from their checkpoints (`resume`; `resumed` counts how often), and every member
// answers every job. On a single node jobs live in this process's memory only (a restarted node
// answers 404 for an old id; the rebalance is safe to run again, since it copies only what is
// missing or corrupt). At most JOBS_MAX are kept in memory; the oldest finished one makes room.

import { randomBytes } from 'node:crypto';
import { isLightwellError, NotFound, Unavailable } from '../util/errors.js';
import type { Logger } from '../util/log.js';

/** How long a rebalance request waits for its work before it answers 202 with a job. */
export const ANSWER_MS_MAX = 3_000;
/** Jobs kept in memory per node. */
export const JOBS_MAX = 200;

export type JobState = 'queued' | 'running' | 'succeeded' | 'failed';

export interface RepairJob {
  readonly jobId: string;
  readonly tenantId: string;
  readonly startedAt: string;
  state: JobState;
  finishedAt?: string;
  result?: Record<string, unknown>;
  error?: { code: string; message: string };
  /** What the work has done so far (the object its work updates in place). */
  progress?: Record<string, unknown>;
  /** The member that runs it (durable jobs). */
  runner?: string;
  /** How many times a restarted runner resumed it from its checkpoint (durable jobs). */
  resumed?: number;
}

/** A durable job as stored: the job, the work's arguments and where the work has got to. */
export interface StoredJob extends RepairJob {
  readonly v: number;
  readonly args: Record<string, unknown>;
  checkpoint: Record<string, unknown>;
}

export interface JobStore {
  save(job: StoredJob): Promise<void>;
  load(jobId: string): Promise<StoredJob | undefined>;
  /** The jobs `runner` runs (the store may drop long-finished ones on the way). */
  listOf(runner: string): Promise<StoredJob[]>;
}

/** Durable work: it resumes from `checkpoint` and calls `checkpointed` when it has moved on. */
export interface DurableWork {
  readonly args: Record<string, unknown>;
  readonly checkpoint: Record<string, unknown>;
  /** Told the job's id once the work is a job: its checkpoints are stored from then on. */
  readonly bind?: (jobId: string) => void;
}

export type ResumeWork = (
  job: StoredJob,
  checkpointed: () => Promise<void>,
) => Promise<Record<string, unknown>>;

const STORED_VERSION = 1;

export class RepairJobs {
  private readonly jobs = new Map<string, RepairJob>();
  /** Durable jobs by id: the record saved, and the last save (saves of a job never overlap). */
  private readonly stored = new Map<string, { job: StoredJob; saving: Promise<void> }>();

  constructor(private readonly durable?: { store: JobStore; nodeId: string; log: Logger }) {}

  /**
   * Waits up to `budgetMs` for `work`: its result when done by then (a failure is thrown as it
   * is), else a running job that records the result when it comes. With `durable` work on a
   * cluster member, the job is stored (see the header).
   */
  async run(
    tenantId: string,
    work: Promise<Record<string, unknown>>,
    budgetMs = ANSWER_MS_MAX,
    progress?: Record<string, unknown>,
    durable?: DurableWork,
  ): Promise<{ done: Record<string, unknown> } | { job: RepairJob }> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), budgetMs);
    });
    try {
      const done = await Promise.race([work, late]);
      if (done !== undefined) return { done };
    } finally {
      clearTimeout(timer);
    }
    const job = this.add(tenantId, progress);
    if (durable !== undefined && this.durable !== undefined) {
      const stored: StoredJob = {
        ...job,
        v: STORED_VERSION,
        runner: this.durable.nodeId,
        resumed: 0,
        args: durable.args,
        checkpoint: durable.checkpoint,
      };
      this.stored.set(job.jobId, { job: stored, saving: Promise.resolve() });
      durable.bind?.(job.jobId);
      await this.checkpoint(job.jobId);
    }
    this.settle(job, work);
    return { job };
  }

  /** Stores a durable job's state now (its work calls it at each checkpoint); a no-op else. */
  checkpoint(jobId: string): Promise<void> {
    const entry = this.stored.get(jobId);
    const durable = this.durable;
    if (entry === undefined || durable === undefined) return Promise.resolve();
    const job = this.jobs.get(jobId);
    entry.saving = entry.saving.then(async () => {
      const record: StoredJob = { ...entry.job, ...job };
      await durable.store
        .save(JSON.parse(JSON.stringify(record)) as StoredJob)
        .catch((error: unknown) =>
          durable.log.warn({ err: error, jobId }, 'job checkpoint not stored'),
        );
    });
    return entry.saving;
  }

  /** A checkpoint function for work that may become a durable job (before: nothing to store). */
  checkpointer(): { checkpointed: () => Promise<void>; bind: (jobId: string) => void } {
    let bound: string | undefined;
    return {
      checkpointed: () => (bound === undefined ? Promise.resolve() : this.checkpoint(bound)),
      bind: (jobId) => (bound = jobId),
    };
  }

  get(jobId: string): RepairJob {
    const job = this.jobs.get(jobId);
    if (job === undefined)
      throw NotFound(`no repair job ${jobId} on this node (jobs do not survive a restart)`);
    return job;
  }

  /** A job from this node's memory, or (durable jobs) from the store: any member's. */
  async find(jobId: string): Promise<RepairJob> {
    const job = this.jobs.get(jobId);
    if (job !== undefined) return job;
    const stored = await this.durable?.store.load(jobId);
    if (stored === undefined) return this.get(jobId);
    const { v: _v, args: _args, checkpoint: _checkpoint, ...shown } = stored;
    return shown;
  }

  /**
   * Resumes this node's durable jobs that were running when it stopped, each from its
   * checkpoint (`work` runs it); answers how many.
   */
  async resume(work: ResumeWork): Promise<number> {
    const durable = this.durable;
    if (durable === undefined) return 0;
    const running = (await durable.store.listOf(durable.nodeId)).filter(
      (stored) => stored.state === 'running' && !this.jobs.has(stored.jobId),
    );
    for (const stored of running) {
      stored.resumed = (stored.resumed ?? 0) + 1;
      const { v: _v, args: _args, checkpoint, ...job } = stored;
      // The checkpoint's own progress, which the work updates, is what the job shows.
      const progress = checkpoint['progress'];
      if (typeof progress === 'object' && progress !== null)
        job.progress = progress as Record<string, unknown>;
      this.jobs.set(job.jobId, job);
      this.stored.set(job.jobId, { job: stored, saving: Promise.resolve() });
      await this.checkpoint(job.jobId);
      durable.log.info({ jobId: job.jobId, resumed: stored.resumed }, 'rebalance job resumed');
      this.settle(
        job,
        work(stored, () => this.checkpoint(job.jobId)),
      );
    }
    return running.length;
  }

  private add(tenantId: string, progress: Record<string, unknown> | undefined): RepairJob {
    this.makeRoom();
    const job: RepairJob = {
      jobId: `rj_${randomBytes(12).toString('hex')}`,
      tenantId,
      startedAt: new Date().toISOString(),
      state: 'running',
      ...(progress === undefined ? {} : { progress }),
    };
    this.jobs.set(job.jobId, job);
    return job;
  }

  /** Records the work's end on the job (and stores it when durable). */
  private settle(job: RepairJob, work: Promise<Record<string, unknown>>): void {
    work.then(
      (result) => {
        job.state = 'succeeded';
        job.result = result;
        job.finishedAt = new Date().toISOString();
        void this.checkpoint(job.jobId);
      },
      (error: unknown) => {
        const known = isLightwellError(error) ? error : Unavailable('the rebalance failed');
        job.state = 'failed';
        job.error = { code: known.code, message: known.message };
        job.finishedAt = new Date().toISOString();
        void this.checkpoint(job.jobId);
      },
    );
  }

  private makeRoom(): void {
    if (this.jobs.size < JOBS_MAX) return;
    for (const [id, job] of this.jobs)
      if (job.finishedAt !== undefined) {
        this.jobs.delete(id);
        this.stored.delete(id);
        return;
      }
    throw Unavailable(`${JOBS_MAX} rebalance jobs are running on this node; try again later`);
  }
}
