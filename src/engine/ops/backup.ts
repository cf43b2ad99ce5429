// Backups in the index: the job row of each backup (of the whole store or of one tenant) and of
// each restore of a tenant backup into the running store, and the commands that queue them. The
// work is src/engine/backup.ts, src/engine/tenant-backup.ts and src/engine/tenant-restore.ts,
// whose headers state the invariants and the layouts.
//
// Persists: `meta` rows `backup\0<name>` and `restore\0<id>` (docs/on-disk-format.md §5).

import { Buffer } from 'node:buffer';
import { DB, tenantKey, type TenantRecord } from '../index/schema.js';
import type { EngineContext } from './context.js';
import { targetNamed } from './backup-targets.js';
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
  /** The tenant backed up (its objects, src/engine/tenant-backup.ts); absent: the whole store. */
  tenant?: string;
  /** The S3 endpoint it is uploaded to once complete (backup-targets.ts), and how far. */
  target?: string;
  upload?: { files: number; bytes: number; copied: number };
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
 * Queues a backup of the whole store (or, with `tenantId`, of one tenant) into
 * `backup.directory`/`name`. One backup or restore runs at a time and a name is used once;
 * `base` must be a complete backup of the same kind. A dry run answers the job queued.
 */
export function startBackup(
  context: EngineContext,
  args: { name: unknown; base?: unknown; tenantId?: unknown; target?: unknown; dryRun?: boolean },
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
    if (found.tenant !== args.tenantId)
      throw Conflict(
        `backup ${base} is of ${found.tenant === undefined ? 'the whole store' : `tenant ${found.tenant}`}; ` +
          'a base is a backup of the same tenant (or of the whole store)',
      );
  }
  const tenant = args.tenantId === undefined ? undefined : liveTenant(context, args.tenantId);
  const target = args.target === undefined ? undefined : targetNamed(context, args.target).name;
  refuseBusy(context);
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
    ...(tenant === undefined ? {} : { tenant: tenant.id }),
    ...(target === undefined ? {} : { target }),
  };
  if (args.dryRun !== true) {
    context.store.put(DB.meta, backupKey(name), job);
    for (const wake of backupWakers) queueMicrotask(wake);
  }
  return job;
}

function liveTenant(context: Pick<EngineContext, 'store'>, tenantId: unknown): TenantRecord {
  if (typeof tenantId !== 'string') throw BadRequest('tenantId must be a tenant id');
  const tenant = context.store.get<TenantRecord>(DB.tenants, tenantKey(tenantId));
  if (!tenant || tenant.state === 'deleted') throw NotFound(`tenant ${tenantId} not found`);
  return tenant;
}

/** One backup or restore runs at a time (they share the engine's runner and its disk). */
function refuseBusy(context: Pick<EngineContext, 'store'>): void {
  const busy = backupJobs(context).find((job) => job.state === 'queued' || job.state === 'running');
  if (busy) throw Conflict(`backup ${busy.name} is ${busy.state}; one backup runs at a time`);
  const restoring = restoreJobs(context).find(
    (job) => job.state === 'queued' || job.state === 'running',
  );
  if (restoring)
    throw Conflict(
      `the restore of ${restoring.backup} into ${restoring.tenantId} is ${restoring.state}; ` +
        'one backup or restore runs at a time',
    );
}

export const RESTORE_PREFIX = 'restore\0';

export type RestoreState = 'queued' | 'running' | 'complete' | 'failed';

/** A restore of a tenant backup into a tenant of the running store (engine/tenant-restore.ts). */
export interface RestoreRecord {
  /** `<backup>@<queuedAt>`: a backup may be restored more than once. */
  id: string;
  backup: string;
  /** The tenant the objects go into: the one backed up or another, active, tenant. */
  tenantId: string;
  state: RestoreState;
  queuedAt: number;
  startedAt?: number;
  finishedAt?: number;
  objectsTotal: number;
  /** Objects written, and objects found already in place (a restore resumed after a stop). */
  objectsDone: number;
  objectsSkipped: number;
  bytesTotal: number;
  bytesDone: number;
  bucketsCreated: number;
  /** The version records behind the restore's cursor: committed or found in place. */
  recordsDone?: number;
  error?: string;
}

export function restoreKey(id: string): Buffer {
  return Buffer.from(RESTORE_PREFIX + id, 'utf8');
}

/** Every restore job, in id order. */
export function restoreJobs(context: Pick<EngineContext, 'store'>): RestoreRecord[] {
  const start = Buffer.from(RESTORE_PREFIX, 'utf8');
  const end = Buffer.concat([start, Buffer.from([0xff])]);
  return [...context.store.range<RestoreRecord>(DB.meta, { start, end })].map(
    (entry) => entry.value,
  );
}

/**
 * Queues the restore of tenant backup `backup` into the active tenant `tenantId` (the one backed
 * up, or another). What it will write is planned by the runner's `planRestore` beforehand; the
 * runner checks the backup's files again as it reads them. A dry run answers the job queued.
 */
export function startRestore(
  context: EngineContext,
  args: { backup: unknown; tenantId: unknown; dryRun?: boolean },
): RestoreRecord {
  if (typeof args.backup !== 'string') throw BadRequest('backup must be the name of a backup');
  const found = context.store.get<BackupRecord>(DB.meta, backupKey(args.backup));
  if (!found) throw NotFound(`no backup named ${args.backup}`);
  if (found.state !== 'complete') throw Conflict(`backup ${found.name} is ${found.state}`);
  if (found.tenant === undefined)
    throw Conflict(
      `backup ${found.name} is of the whole store: it is restored offline, into an empty data ` +
        'directory (lightwell restore)',
    );
  const tenant = liveTenant(context, args.tenantId);
  if (tenant.state !== 'active') throw Conflict(`tenant ${tenant.id} is ${tenant.state}`);
  refuseBusy(context);
  const queuedAt = context.now();
  const job: RestoreRecord = {
    id: `${found.name}@${queuedAt}`,
    backup: found.name,
    tenantId: tenant.id,
    state: 'queued',
    queuedAt,
    objectsTotal: found.counts?.versions ?? 0,
    objectsDone: 0,
    objectsSkipped: 0,
    bytesTotal: 0,
    bytesDone: 0,
    bucketsCreated: 0,
  };
  if (args.dryRun !== true) {
    context.store.put(DB.meta, restoreKey(job.id), job);
    for (const wake of backupWakers) queueMicrotask(wake);
  }
  return job;
}
