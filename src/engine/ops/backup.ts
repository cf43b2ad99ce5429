// Backups in the index: the job row of each backup and the command that queues one. The work is
// src/engine/backup.ts, whose header states the invariants and the backup's layout.
//
// Persists: `meta` rows `backup\0<name>` (docs/on-disk-format.md §5).

import { Buffer } from 'node:buffer';
import { DB } from '../index/schema.js';
import type { EngineContext } from './context.js';
import { BadRequest, Conflict, NotFound } from '../../util/errors.js';

export const BACKUP_PREFIX = 'backup\0';
/** A backup's name: its directory under `backup.directory`. */
export const BACKUP_NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;

export type BackupState = 'queued' | 'running' | 'complete' | 'failed';

export interface BackupRecord {
  name: string;
  state: BackupState;
  /** A complete backup whose identical sealed segments are hard-linked, not copied. */
  base?: string;
  queuedAt: number;
  startedAt?: number;
  finishedAt?: number;
  /** When the index snapshot was taken. */
  snapshotAt?: number;
  segmentsTotal: number;
  segmentsDone: number;
  segmentsReused: number;
  bytesTotal: number;
  bytesDone: number;
  /** What the snapshot holds. */
  counts?: { tenants: number; buckets: number; versions: number; chunks: number };
  error?: string;
}

export function backupKey(name: string): Buffer {
  return Buffer.from(BACKUP_PREFIX + name, 'utf8');
}

/** Every backup job, oldest name first. */
export function backupJobs(context: Pick<EngineContext, 'store'>): BackupRecord[] {
  const start = Buffer.from(BACKUP_PREFIX, 'utf8');
  const end = Buffer.concat([start, Buffer.from([0xff])]);
  return [...context.store.range<BackupRecord>(DB.meta, { start, end })].map(
    (entry) => entry.value,
  );
}

/** The runner's wake-ups (src/engine/backup.ts). */
export const backupWakers = new Set<() => void>();

/**
 * Queues a backup of the whole store into `backup.directory`/`name`. One backup runs at a time
 * and a name is used once; `base` must be a complete backup. A dry run answers the job queued.
 */
export function startBackup(
  context: EngineContext,
  args: { name: unknown; base?: unknown; dryRun?: boolean },
): BackupRecord {
  if (context.settings.string('backup.directory') === '')
    throw Conflict('backups are off: set backup.directory to the directory that receives them');
  const { name, base } = args;
  if (typeof name !== 'string' || !BACKUP_NAME.test(name))
    throw BadRequest('name must be 1 to 63 of a-z, 0-9, ".", "_" and "-", starting alphanumeric');
  if (context.store.get(DB.meta, backupKey(name)) !== undefined)
    throw Conflict(`a backup named ${name} exists already`);
  if (base !== undefined) {
    if (typeof base !== 'string') throw BadRequest('base must be the name of a backup');
    const found = context.store.get<BackupRecord>(DB.meta, backupKey(base));
    if (!found) throw NotFound(`no backup named ${base}`);
    if (found.state !== 'complete') throw Conflict(`backup ${base} is ${found.state}`);
  }
  const busy = backupJobs(context).find((job) => job.state === 'queued' || job.state === 'running');
  if (busy) throw Conflict(`backup ${busy.name} is ${busy.state}; one backup runs at a time`);
  const job: BackupRecord = {
    name,
    state: 'queued',
    queuedAt: context.now(),
    segmentsTotal: 0,
    segmentsDone: 0,
    segmentsReused: 0,
    bytesTotal: 0,
    bytesDone: 0,
    ...(typeof base === 'string' ? { base } : {}),
  };
  if (args.dryRun !== true) {
    context.store.put(DB.meta, backupKey(name), job);
    for (const wake of backupWakers) queueMicrotask(wake);
  }
  return job;
}
