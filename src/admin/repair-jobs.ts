// Rebalance jobs (DECISIONS.md "Cluster mode": `POST /cluster/repair/rebalance` answers 200 with
// the report when done within the request, or 202 with `{jobId, state}`, and
// `GET /cluster/repair/jobs/{jobId}` reports it). A rebalance that outlasts ANSWER_MS_MAX keeps
// running here as a job. Jobs live in this admin process's memory only: they do not survive a
// restart of the node (a restarted node answers 404 for an old id; the rebalance is safe to run
// again, since it copies only what is missing or corrupt). At most JOBS_MAX are kept; the oldest
// finished one makes room. A job runs until its work ends, however long (no time cap: a scrub of
// a large tenant takes what it takes); while it runs, `progress` shows the figures its work keeps
// up to date.

import { randomBytes } from 'node:crypto';
import { isLightwellError, NotFound, Unavailable } from '../util/errors.js';

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
}

export class RepairJobs {
  private readonly jobs = new Map<string, RepairJob>();

  /**
   * Waits up to `budgetMs` for `work`: its result when done by then (a failure is thrown as it
   * is), else a running job that records the result when it comes.
   */
  async run(
    tenantId: string,
    work: Promise<Record<string, unknown>>,
    budgetMs = ANSWER_MS_MAX,
    progress?: Record<string, unknown>,
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
    return { job: this.add(tenantId, work, progress) };
  }

  get(jobId: string): RepairJob {
    const job = this.jobs.get(jobId);
    if (job === undefined)
      throw NotFound(`no repair job ${jobId} on this node (jobs do not survive a restart)`);
    return job;
  }

  private add(
    tenantId: string,
    work: Promise<Record<string, unknown>>,
    progress: Record<string, unknown> | undefined,
  ): RepairJob {
    this.makeRoom();
    const job: RepairJob = {
      jobId: `rj_${randomBytes(12).toString('hex')}`,
      tenantId,
      startedAt: new Date().toISOString(),
      state: 'running',
      ...(progress === undefined ? {} : { progress }),
    };
    this.jobs.set(job.jobId, job);
    work.then(
      (result) => {
        job.state = 'succeeded';
        job.result = result;
        job.finishedAt = new Date().toISOString();
      },
      (error: unknown) => {
        const known = isLightwellError(error) ? error : Unavailable('the rebalance failed');
        job.state = 'failed';
        job.error = { code: known.code, message: known.message };
        job.finishedAt = new Date().toISOString();
      },
    );
    return job;
  }

  private makeRoom(): void {
    if (this.jobs.size < JOBS_MAX) return;
    for (const [id, job] of this.jobs)
      if (job.finishedAt !== undefined) {
        this.jobs.delete(id);
        return;
      }
    throw Unavailable(`${JOBS_MAX} rebalance jobs are running on this node; try again later`);
  }
}
