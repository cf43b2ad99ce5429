// Rebalance jobs kept in etcd (docs/cluster.md §9), so that a job outlives the admin process
// that runs it: `jobs/<jobId>` holds the job (its state, its arguments, the node that runs it,
// its progress and checkpoint, and its report once done), written by that node as the job goes.
// A node that starts again resumes its own running jobs from their checkpoints
// (src/admin/repair-jobs.ts), and any member answers any job's state from here. A job's record
// is small (its report lists at most 1000 corrupt chunks); finished ones are deleted after
// JOB_KEEP_MS by the node that ran them.

import type { Registry } from './registry.js';

export const JOBS_PREFIX = 'jobs/';
/** How long a finished job's record is kept. */
export const JOB_KEEP_MS = 7 * 24 * 60 * 60 * 1000;

export interface StoredJobRecord {
  readonly jobId: string;
  readonly runner?: string;
  readonly state: string;
  readonly finishedAt?: string;
}

export class EtcdJobStore<T extends StoredJobRecord> {
  constructor(private readonly registry: () => Promise<Registry>) {}

  async save(job: T): Promise<void> {
    const registry = await this.registry();
    await registry.client.put(registry.key(JOBS_PREFIX + job.jobId)).value(JSON.stringify(job));
  }

  async load(jobId: string): Promise<T | undefined> {
    const registry = await this.registry();
    const text = await registry.client.get(registry.key(JOBS_PREFIX + jobId)).string();
    return text === null ? undefined : (JSON.parse(text) as T);
  }

  /** The jobs `runner` runs; its finished ones older than JOB_KEEP_MS are deleted on the way. */
  async listOf(runner: string, now = Date.now()): Promise<T[]> {
    const registry = await this.registry();
    const prefix = registry.key(JOBS_PREFIX);
    const all = Object.values(await registry.client.getAll().prefix(prefix).strings());
    const jobs = all.map((text) => JSON.parse(text) as T).filter((job) => job.runner === runner);
    const old = jobs.filter(
      (job) => job.finishedAt !== undefined && now - Date.parse(job.finishedAt) > JOB_KEEP_MS,
    );
    for (const job of old) await registry.client.delete().key(prefix + job.jobId);
    return jobs.filter((job) => !old.includes(job));
  }
}
