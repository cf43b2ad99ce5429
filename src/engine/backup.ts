// Backup of the whole store into a directory, run by the engine in the background, and its
// restore into an empty data directory (`lightwell restore`, src/cli/restore.ts). The same
// runner runs backups of one tenant and their restores into the running store
// (src/engine/tenant-backup.ts, tenant-restore.ts), one job at a time.
//
// A backup is `<backup.directory>/<name>/`:
//   manifest.json        {format: "lightwell-backup", version: 1, name, base, createdAt,
//                         snapshotAt, counts, files: [{path, bytes, sha256}]}
//   FORMAT               the data directory's format marker
//   index/data.mdb       a compacted copy of the index, taken in one LMDB read transaction
//   keys/master.key      the master key that opens the index's tenant keys (mode 0600)
//   segments/<id>.seg    every segment the index snapshot knows, except those being deleted
//
// Invariants:
// - Consistent: the index copy is one snapshot (LMDB's copy of a read transaction). Every chunk
//   entry in it points at a record that was durable before the entry committed, in a segment
//   file that exists then; segment files only grow (open) or never change (sealed), so a copy
//   taken afterwards holds every record the snapshot references (an open segment may hold more,
//   which recovery after a restore treats as any torn or unreferenced tail). While the backup
//   runs, every segment it may copy is pinned (segment-pins.ts), so compaction deletes none of
//   them. The master key is read after the snapshot and checked against the snapshot's check
//   value; a master-key rotation in between makes it take the snapshot again.
// - Open segments in the copy lose their owner, so the restored engine recovers and seals them;
//   backup job rows are removed from the copy (a restored store has run no backup).
// - Incremental: with `base`, a sealed segment the base backup holds at the same size (sealed
//   segments never change) is hard-linked from it, not copied; each backup stays complete on
//   its own and deleting one never damages another.
// - Atomic: the backup is written under `.<name>.partial` and renamed into place only once every
//   file and the manifest are durable. A backup cut by a crash or a stop is marked failed at
//   the next start and its partial directory removed (or complete, when the crash fell after
//   the rename); there is no half backup to restore.
// - Verified: the manifest holds the SHA-256 and size of every file; a restore checks each one
//   as it copies it and refuses a backup that does not match, before anything is in place.
//
// Security: a backup holds the master key, so it opens every object; the backup directory is
// made 0700 and the key file 0600, and backups are for an owner token without a tenant scope
// (docs/console.md). The directory is the operator's setting, never a path a request names.

import { Buffer } from 'node:buffer';
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { link, mkdir, open, readFile, readdir, rename, rm, rmdir, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Logger } from 'pino';
import { IndexStore } from './index/store.js';
import {
  DB,
  META_MASTER_KEY_CHECK,
  type SegmentRecord,
  type TenantRecord,
} from './index/schema.js';
import type { EngineContext } from './ops/context.js';
import type { DataDirPaths } from './data-dir.js';
import { dataDirPaths } from './data-dir.js';
import { masterKeyCheckOf, type MasterKeyCheckRecord } from './master-key-check.js';
import { segmentFileName } from '../format/segment-header.js';
import {
  BACKUP_PREFIX,
  RESTORE_PREFIX,
  backupJobs,
  backupKey,
  backupWakers,
  restoreJobs,
  restoreKey,
  type BackupRecord,
  type RestoreRecord,
} from './ops/backup.js';
import { SegmentReader } from './segments/segment-reader.js';
import type { SegmentWriter } from './segments/segment-writer.js';
import { engineSegmentWriter } from './segments/engine-writer.js';
import { writeTenantBackup, type TenantJobDeps, type TenantManifestPart } from './tenant-backup.js';
import { openTenantBackup, runRestore } from './tenant-restore.js';
import { masterKeyFingerprint } from './master-key-rotation.js';
import { fetchBackup, uploadBackup } from './backup-upload.js';
import { unwrapBackupKey } from './backup-seal.js';
import { keepBackupKey } from './ops/backup-keys.js';
import { Conflict, CorruptData, NotFound, errorCode } from '../util/errors.js';
import { nodeIo, type Io } from '../util/io.js';

const MANIFEST = 'manifest.json';
const MANIFEST_FORMAT = 'lightwell-backup';
const COPY_BYTES = 1024 * 1024;
/** Snapshots taken before giving up when a master-key rotation keeps racing the backup. */
const SNAPSHOT_TRIES = 3;
const POLL_MS = 5_000;

export interface ManifestFile {
  path: string;
  bytes: number;
  sha256: string;
}

export interface BackupManifest extends Partial<TenantManifestPart> {
  format: typeof MANIFEST_FORMAT;
  /** 1: the whole store; 2: a tenant (tenant-backup.ts), with the fields it adds. */
  version: 1 | 2;
  name: string;
  base: string | null;
  createdAt: string;
  snapshotAt: string;
  counts: NonNullable<BackupRecord['counts']>;
  files: ManifestFile[];
}

/** Copies `from` (its first `bytes`, or all of it) to `to`, durable; answers its SHA-256. */
async function copyHashed(
  from: string,
  to: string,
  bytes?: number,
  mode = 0o600,
): Promise<ManifestFile> {
  const source = await open(from, constants.O_RDONLY);
  const target = await open(to, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, mode);
  const hash = createHash('sha256');
  const buffer = Buffer.allocUnsafe(COPY_BYTES);
  let copied = 0;
  try {
    const limit = bytes ?? (await source.stat()).size;
    while (copied < limit) {
      const { bytesRead } = await source.read(
        buffer,
        0,
        Math.min(COPY_BYTES, limit - copied),
        copied,
      );
      if (bytesRead === 0) break;
      const slice = buffer.subarray(0, bytesRead);
      hash.update(slice);
      await target.write(slice, 0, bytesRead, copied);
      copied += bytesRead;
    }
    await target.datasync();
  } finally {
    await source.close();
    await target.close();
  }
  return { path: '', bytes: copied, sha256: hash.digest('hex') };
}

async function writeDurable(path: string, bytes: Buffer, mode: number): Promise<ManifestFile> {
  const file = await open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, mode);
  try {
    await file.write(bytes, 0, bytes.length, 0);
    await file.datasync();
  } finally {
    await file.close();
  }
  return {
    path: '',
    bytes: bytes.length,
    sha256: createHash('sha256').update(bytes).digest('hex'),
  };
}

async function hashFile(path: string): Promise<ManifestFile> {
  const bytes = await readFile(path);
  return {
    path: '',
    bytes: bytes.length,
    sha256: createHash('sha256').update(bytes).digest('hex'),
  };
}

function messageOf(error: unknown): string {
  return `${errorCode(error) ?? 'internal'}: ${error instanceof Error ? error.message : String(error)}`;
}

export interface BackupRunnerOptions {
  context: EngineContext;
  paths: DataDirPaths;
  pins: { set(owner: object, segmentIds: readonly number[]): void; drop(owner: object): void };
  log: Logger;
  io?: Io;
}

/** Runs queued backups and restores, one at a time, in the background. */
export class BackupRunner {
  private running: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly reader: SegmentReader;
  /** The restores' own segment, made on first use. */
  private writer: SegmentWriter | undefined;

  constructor(private readonly options: BackupRunnerOptions) {
    this.reader = new SegmentReader(options.paths.segments);
  }

  /**
   * Settles the backups a crash or a stop cut (complete or failed) and queues the restores it
   * cut again (they skip what is in place), then runs what is queued.
   */
  async start(): Promise<void> {
    const { context, log } = this.options;
    for (const job of backupJobs(context)) if (job.state === 'running') await this.settleCut(job);
    for (const job of restoreJobs(context))
      if (job.state === 'running') {
        await this.updateRestore(job.id, { state: 'queued' });
        log.warn({ restore: job.id }, 'restore cut by a stop, queued again');
      }
    backupWakers.add(this.wake);
    this.timer = setInterval(this.wake, POLL_MS);
    this.timer.unref();
    this.wake();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    backupWakers.delete(this.wake);
    if (this.timer) clearInterval(this.timer);
    await this.running;
    await this.writer?.close();
    this.reader.close();
  }

  readonly wake = (): void => {
    if (this.stopped) return;
    this.running ??= this.runQueued()
      .catch((error: unknown) => this.options.log.error({ err: error }, 'backup runner failed'))
      .finally(() => {
        this.running = undefined;
      });
  };

  /** Runs every queued backup (also what tests await). */
  async runQueued(): Promise<void> {
    for (;;) {
      // Read in a transaction of its own: it queues behind the command that woke the runner.
      const { context } = this.options;
      const [jobs, restores] = await context.store.transact(() => [
        backupJobs(context),
        restoreJobs(context),
      ]);
      const job = jobs.find((entry) => entry.state === 'queued');
      const restore = restores.find((entry) => entry.state === 'queued');
      if ((!job && !restore) || this.isStopped()) return;
      if (job) await this.run(job);
      else if (restore) await this.runRestore(restore);
    }
  }

  private deps(): TenantJobDeps {
    return {
      context: this.options.context,
      reader: this.reader,
      writer: () => (this.writer ??= this.newWriter()),
      pins: this.options.pins,
      isStopped: () => this.isStopped(),
    };
  }

  private newWriter(): SegmentWriter {
    const { context, paths } = this.options;
    return engineSegmentWriter({
      context,
      segmentsDir: paths.segments,
      io: this.options.io ?? nodeIo,
    });
  }

  private async updateRestore(id: string, change: Partial<RestoreRecord>): Promise<void> {
    const { store } = this.options.context;
    await store.transact(() => {
      const current = store.get<RestoreRecord>(DB.meta, restoreKey(id));
      if (current) store.put(DB.meta, restoreKey(id), { ...current, ...change });
    });
  }

  /** Restores a tenant backup into the running store (tenant-restore.ts). */
  private async runRestore(job: RestoreRecord): Promise<void> {
    const { context, log } = this.options;
    await this.updateRestore(job.id, { state: 'running', startedAt: context.now() });
    try {
      const dir = await this.localCopy(job.backup);
      const source = await openTenantBackup(context, dir);
      await runRestore(this.deps(), job, source);
      await this.updateRestore(job.id, { state: 'complete', finishedAt: context.now() });
      log.info({ restore: job.id, tenant: job.tenantId }, 'restore complete');
    } catch (error) {
      if (this.isStopped()) return; // left running: the next start queues it again
      await this.updateRestore(job.id, {
        state: 'failed',
        finishedAt: context.now(),
        error: messageOf(error),
      });
      log.error({ err: error, restore: job.id }, 'restore failed');
    }
  }

  /** Backup `name`'s directory: fetched from its target first when it is gone here. */
  private async localCopy(name: string): Promise<string> {
    const { context, log } = this.options;
    const dir = join(this.root(), name);
    const job = context.store.get<BackupRecord>(DB.meta, backupKey(name));
    const here = await stat(join(dir, MANIFEST)).then(
      () => true,
      () => false,
    );
    if (here || job?.target === undefined) return dir;
    log.warn({ backup: name, target: job.target }, 'backup fetched from its target to restore');
    return fetchBackup(context, { name, target: job.target }, this.root(), {
      isStopped: () => this.isStopped(),
    });
  }

  private isStopped(): boolean {
    return this.stopped;
  }

  private root(): string {
    return this.options.context.settings.string('backup.directory');
  }

  private async removePartial(name: string): Promise<void> {
    const root = this.root();
    if (root !== '') await rm(join(root, `.${name}.partial`), { recursive: true, force: true });
  }

  /**
   * A backup the engine stopped in: complete when its directory was renamed into place (the
   * crash fell between the rename and the row saying so), else failed and its partial
   * directory removed. Either way no half backup stays under its name.
   */
  private async settleCut(job: BackupRecord): Promise<void> {
    const { context, log } = this.options;
    const root = this.root();
    const manifest =
      root === '' ? undefined : await readManifest(join(root, job.name)).catch(() => undefined);
    // One with a target is complete only once uploaded, which its row would say: failed.
    const ours =
      job.target === undefined &&
      manifest?.name === job.name &&
      Date.parse(manifest.createdAt) >= (job.startedAt ?? 0);
    if (!ours) await this.removePartial(job.name);
    if (!ours && job.target !== undefined && root !== '')
      await rm(join(root, job.name), { recursive: true, force: true });
    const change: Partial<BackupRecord> = ours
      ? { state: 'complete', counts: manifest.counts }
      : {
          state: 'failed',
          error: 'interrupted: the engine stopped while it ran; nothing of it was kept',
        };
    await context.store.transact(() =>
      context.store.put(DB.meta, backupKey(job.name), {
        ...job,
        ...change,
        finishedAt: context.now(),
      }),
    );
    log.warn({ backup: job.name, state: change.state }, 'backup cut by a stop, settled');
  }

  private async update(name: string, change: Partial<BackupRecord>): Promise<void> {
    const { store } = this.options.context;
    await store.transact(() => {
      const current = store.get<BackupRecord>(DB.meta, backupKey(name));
      if (current) store.put(DB.meta, backupKey(name), { ...current, ...change });
    });
  }

  private async run(job: BackupRecord): Promise<void> {
    const { context, log, pins } = this.options;
    await this.update(job.name, { state: 'running', startedAt: context.now() });
    try {
      const counts = await this.write(job);
      if (job.target !== undefined) await this.upload(job, job.target);
      await this.update(job.name, { state: 'complete', finishedAt: context.now(), counts });
      log.info({ backup: job.name, ...counts }, 'backup complete');
    } catch (error) {
      if (this.isStopped()) return; // left running: the next start marks it failed
      await this.removePartial(job.name).catch(() => undefined);
      // An upload that failed: the local copy goes too, so a failed backup leaves nothing.
      if (job.target !== undefined)
        await rm(join(this.root(), job.name), { recursive: true, force: true }).catch(
          () => undefined,
        );
      await this.update(job.name, {
        state: 'failed',
        finishedAt: context.now(),
        error: messageOf(error),
      });
      log.error({ err: error, backup: job.name }, 'backup failed');
    } finally {
      pins.drop(this);
    }
  }

  /** Uploads complete backup `job` to its target (backup-upload.ts), over its base's copy. */
  private async upload(job: BackupRecord, target: string): Promise<void> {
    const { context } = this.options;
    const base =
      job.base === undefined
        ? undefined
        : context.store.get<BackupRecord>(DB.meta, backupKey(job.base));
    const upload = await uploadBackup(
      context,
      {
        name: job.name,
        target,
        ...(base === undefined ? {} : { base: base.name }),
        ...(base?.target === undefined ? {} : { baseTarget: base.target }),
      },
      this.root(),
      {
        isStopped: () => this.isStopped(),
        progress: (done) => this.update(job.name, { upload: { ...done } }),
      },
    );
    this.options.log.info({ backup: job.name, target, ...upload }, 'backup uploaded');
  }

  /** Writes the backup; answers what its snapshot holds. */
  private async write(job: BackupRecord): Promise<NonNullable<BackupRecord['counts']>> {
    const { context, paths, pins } = this.options;
    const root = this.root();
    const partial = join(root, `.${job.name}.partial`);
    await mkdir(root, { recursive: true, mode: 0o700 });
    await rm(partial, { recursive: true, force: true });
    if (job.tenant !== undefined) return this.writeTenant(job, partial);
    for (const dir of ['index', 'segments', 'keys'])
      await mkdir(join(partial, dir), { recursive: true, mode: 0o700 });
    const before = [...context.store.range<SegmentRecord>(DB.segments, {})].map((e) => e.value.id);
    pins.set(this, before);
    const snapshot = await this.snapshot(join(partial, 'index'));
    pins.set(this, [...new Set([...before, ...snapshot.segments.map((segment) => segment.id)])]);
    await this.update(job.name, {
      snapshotAt: snapshot.at,
      segmentsTotal: snapshot.segments.length,
      bytesTotal: snapshot.segments.reduce((sum, segment) => sum + (segment.size ?? 0), 0),
    });
    const files: ManifestFile[] = [
      { ...(await hashFile(join(partial, 'index', 'data.mdb'))), path: 'index/data.mdb' },
      {
        ...(await writeDurable(join(partial, 'keys', 'master.key'), snapshot.key, 0o600)),
        path: 'keys/master.key',
      },
      {
        ...(await copyHashed(paths.marker, join(partial, 'FORMAT'), undefined, 0o644)),
        path: 'FORMAT',
      },
    ];
    const base =
      job.base === undefined ? new Map<string, ManifestFile>() : await this.baseFiles(job.base);
    let done = 0;
    let bytesDone = 0;
    let reused = 0;
    for (const segment of snapshot.segments) {
      if (this.isStopped()) throw Conflict('the engine is stopping');
      const name = `segments/${segmentFileName(segment.id)}`;
      const copied = await this.copySegment(segment, name, partial, base, job.base);
      if (copied) {
        files.push(copied.file);
        if (copied.reused) reused += 1;
        bytesDone += copied.file.bytes;
      }
      done += 1;
      await this.update(job.name, { segmentsDone: done, segmentsReused: reused, bytesDone });
    }
    const manifest: BackupManifest = {
      format: MANIFEST_FORMAT,
      version: 1,
      name: job.name,
      base: job.base ?? null,
      createdAt: new Date(context.now()).toISOString(),
      snapshotAt: new Date(snapshot.at).toISOString(),
      counts: snapshot.counts,
      files,
    };
    await this.finish(manifest, partial, ['index', 'segments', 'keys']);
    return snapshot.counts;
  }

  /** Writes the manifest, makes the partial directory durable and renames it into place. */
  private async finish(manifest: BackupManifest, partial: string, dirs: string[]): Promise<void> {
    const root = this.root();
    await writeDurable(
      join(partial, MANIFEST),
      Buffer.from(JSON.stringify(manifest, null, 2) + '\n'),
      0o600,
    );
    for (const dir of dirs) await nodeIo.syncDirectory(join(partial, dir));
    await nodeIo.syncDirectory(partial);
    await rename(partial, join(root, manifest.name));
    await nodeIo.syncDirectory(root);
  }

  /** A tenant's backup (tenant-backup.ts) from a snapshot of the index, removed afterwards. */
  private async writeTenant(
    job: BackupRecord,
    partial: string,
  ): Promise<NonNullable<BackupRecord['counts']>> {
    const { context, pins } = this.options;
    await mkdir(join(partial, 'objects'), { recursive: true, mode: 0o700 });
    const before = [...context.store.range<SegmentRecord>(DB.segments, {})].map((e) => e.value.id);
    pins.set(this, before);
    const indexDir = join(partial, '.snapshot');
    const snapshot = await this.snapshot(indexDir);
    pins.set(this, [...new Set([...before, ...snapshot.segments.map((segment) => segment.id)])]);
    await this.update(job.name, { snapshotAt: snapshot.at });
    const base = job.base === undefined ? undefined : await this.tenantBase(job.base);
    const copy = IndexStore.open({ path: indexDir, readOnly: true });
    let written: Awaited<ReturnType<typeof writeTenantBackup>>;
    try {
      written = await writeTenantBackup(
        this.deps(),
        job,
        {
          copy,
          master: snapshot.key,
          fingerprint: masterKeyFingerprint(snapshot.key),
          at: snapshot.at,
        },
        partial,
        base,
        (done) =>
          this.update(job.name, {
            segmentsDone: done.objects,
            segmentsReused: done.linked,
            bytesDone: done.bytes,
          }),
      );
    } finally {
      await copy.close();
    }
    await rm(indexDir, { recursive: true, force: true });
    // The chain's key into the index before the backup is in place (ops/backup-keys.ts).
    const { encryption } = written.part;
    const dataKey = unwrapBackupKey(snapshot.key, encryption.masterKey, encryption);
    await context.store.transact(() => keepBackupKey(context, encryption.keyId, dataKey));
    await this.update(job.name, {
      segmentsTotal: written.counts.versions,
      bytesTotal: written.part.totals.bytes,
    });
    const manifest: BackupManifest = {
      format: MANIFEST_FORMAT,
      version: 2,
      name: job.name,
      base: job.base ?? null,
      ...written.part,
      createdAt: new Date(context.now()).toISOString(),
      snapshotAt: new Date(snapshot.at).toISOString(),
      counts: written.counts,
      files: written.files,
    };
    await this.finish(manifest, partial, ['objects']);
    return written.counts;
  }

  /** A tenant backup's base: its directory and what its manifest says of its records. */
  private async tenantBase(name: string) {
    const dir = join(this.root(), name);
    const manifest = await readManifest(dir);
    if (manifest.version !== 2 || !manifest.encryption || !manifest.records || !manifest.totals)
      return undefined; // of an earlier format: this backup is a full one
    const { tenant, encryption, records, totals } = manifest;
    return { dir, part: { tenant: tenant ?? '', encryption, records, totals } };
  }

  /**
   * The index copy (made ready to restore) and the master key that opens it; taken again when
   * a master-key rotation came in between.
   */
  private async snapshot(indexDir: string): Promise<{
    at: number;
    key: Buffer;
    segments: SegmentRecord[];
    counts: NonNullable<BackupRecord['counts']>;
  }> {
    const { context, paths } = this.options;
    for (let attempt = 1; ; attempt += 1) {
      await rm(indexDir, { recursive: true, force: true });
      await mkdir(indexDir, { mode: 0o700 });
      const at = context.now();
      await context.store.backup(indexDir);
      const key = await readFile(paths.masterKey);
      const copy = IndexStore.open({ path: indexDir, readOnly: false });
      try {
        const check = copy.get<MasterKeyCheckRecord>(DB.meta, META_MASTER_KEY_CHECK);
        if (check && !Buffer.from(check.check).equals(masterKeyCheckOf(key))) {
          if (attempt === SNAPSHOT_TRIES)
            throw Conflict('the master key changed during every snapshot; try the backup again');
          continue;
        }
        const prepared = await copy.transact(() => prepareCopy(copy));
        return { at, key, ...prepared };
      } finally {
        await copy.close();
        await rm(join(indexDir, 'lock.mdb'), { force: true });
      }
    }
  }

  private async baseFiles(base: string): Promise<Map<string, ManifestFile>> {
    const manifest = await readManifest(join(this.root(), base));
    return new Map(manifest.files.map((file) => [file.path, file]));
  }

  /** Copies (or links from the base) one segment; undefined when there is nothing to copy. */
  private async copySegment(
    segment: SegmentRecord,
    name: string,
    partial: string,
    base: ReadonlyMap<string, ManifestFile>,
    baseName: string | undefined,
  ): Promise<{ file: ManifestFile; reused: boolean } | undefined> {
    const source = join(this.options.paths.segments, segmentFileName(segment.id));
    const size = await stat(source).then(
      (found) => found.size,
      (error: unknown) => {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw error;
      },
    );
    if (size === undefined) {
      // An open segment whose file was never made, or a retired one nothing points into.
      if (segment.liveBytes > 0)
        throw CorruptData(`segment ${segment.id} holds live chunks but its file is missing`);
      return undefined;
    }
    const target = join(partial, name);
    const known = base.get(name);
    if (baseName !== undefined && known && segment.state !== 'open' && known.bytes === size) {
      await link(join(this.root(), baseName, name), target);
      return { file: known, reused: true };
    }
    const copied = await copyHashed(source, target, size);
    return { file: { ...copied, path: name }, reused: false };
  }
}

/**
 * Makes the index copy ready to restore, inside its transaction: open segments lose their owner
 * (the restored engine recovers them) and backup rows go. Answers the segments to copy and what
 * the snapshot holds.
 */
function prepareCopy(copy: IndexStore): {
  segments: SegmentRecord[];
  counts: NonNullable<BackupRecord['counts']>;
} {
  const segments: SegmentRecord[] = [];
  for (const { key, value } of [...copy.range<SegmentRecord>(DB.segments, {})]) {
    if (value.state === 'deleted') continue;
    if (value.ownerPid !== undefined) {
      const owned = { ...value };
      delete owned.ownerPid;
      copy.put(DB.segments, Buffer.from(key), owned);
    }
    segments.push(value);
  }
  for (const prefix of [BACKUP_PREFIX, RESTORE_PREFIX]) {
    const start = Buffer.from(prefix, 'utf8');
    for (const { key } of [
      ...copy.range(DB.meta, { start, end: Buffer.concat([start, Buffer.from([0xff])]) }),
    ])
      copy.remove(DB.meta, Buffer.from(key));
  }
  const count = (db: (typeof DB)[keyof typeof DB]): number => {
    let total = 0;
    for (const _entry of copy.range(db, {})) total += 1;
    return total;
  };
  const counts = {
    tenants: [...copy.range<TenantRecord>(DB.tenants, {})].filter(
      (e) => e.value.state !== 'deleted',
    ).length,
    buckets: count(DB.buckets),
    versions: count(DB.versions),
    chunks: count(DB.chunks),
  };
  return { segments, counts };
}

export async function readManifest(dir: string): Promise<BackupManifest> {
  let text: string;
  try {
    text = await readFile(join(dir, MANIFEST), 'utf8');
  } catch {
    throw NotFound(`${dir} holds no Lightwell backup (no ${MANIFEST})`);
  }
  const manifest = JSON.parse(text) as Partial<BackupManifest>;
  if (
    manifest.format !== MANIFEST_FORMAT ||
    !(manifest.version === 1 || (manifest.version === 2 && manifest.tenant !== undefined)) ||
    !Array.isArray(manifest.files)
  )
    throw CorruptData(
      `${join(dir, MANIFEST)} is not a Lightwell backup manifest of version 1 or 2`,
    );
  for (const file of manifest.files)
    if (file.path.startsWith('/') || file.path.split('/').includes('..'))
      throw CorruptData(`${join(dir, MANIFEST)} names a file outside the backup: ${file.path}`);
  return manifest as BackupManifest;
}

/** What a restore did. */
export interface RestoreResult {
  files: number;
  bytes: number;
  counts: BackupManifest['counts'];
  snapshotAt: string;
}

/**
 * Restores the backup in `from` into `dataDir`, which must be absent or empty. Every file is
 * checked against the manifest as it is copied into a staging directory beside `dataDir`; only
 * when all match and are durable does the staging directory become `dataDir`.
 */
export async function restoreBackup(from: string, dataDir: string): Promise<RestoreResult> {
  const manifest = await readManifest(from);
  if (manifest.tenant !== undefined)
    throw Conflict(
      `${from} is a backup of tenant ${manifest.tenant}: it is restored into a running store, ` +
        'from the console (POST /admin/console/api/backups/{name}/restore)',
    );
  const paths = dataDirPaths(dataDir);
  const existing = await readdir(paths.root).catch((error: unknown) => {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  });
  if (existing !== undefined && existing.length > 0)
    throw Conflict(`${paths.root} is not empty: a backup is restored into an empty data directory`);
  const staging = `${paths.root}.restoring-${process.pid}`;
  await rm(staging, { recursive: true, force: true });
  let bytes = 0;
  try {
    for (const dir of ['index', 'segments', 'keys'])
      await mkdir(join(staging, dir), { recursive: true, mode: 0o700 });
    for (const file of manifest.files) {
      const mode = file.path === 'FORMAT' ? 0o644 : 0o600;
      const copied = await copyHashed(
        join(from, file.path),
        join(staging, file.path),
        undefined,
        mode,
      );
      if (copied.bytes !== file.bytes || copied.sha256 !== file.sha256)
        throw CorruptData(
          `${file.path} in the backup does not match its manifest (${copied.bytes} bytes, ` +
            `sha256 ${copied.sha256.slice(0, 16)}…); nothing was restored`,
        );
      bytes += copied.bytes;
    }
    for (const dir of ['index', 'segments', 'keys']) await nodeIo.syncDirectory(join(staging, dir));
    await nodeIo.syncDirectory(staging);
    if (existing !== undefined) await rmdir(paths.root);
    await rename(staging, paths.root);
    await nodeIo.syncDirectory(dirname(paths.root));
  } catch (error) {
    await rm(staging, { recursive: true, force: true });
    throw error;
  }
  return {
    files: manifest.files.length,
    bytes,
    counts: manifest.counts,
    snapshotAt: manifest.snapshotAt,
  };
}
