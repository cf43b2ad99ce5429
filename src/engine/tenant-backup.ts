// Backup of one tenant, and its restore into a tenant of the running store (the same tenant or
// another), run by the engine's backup runner (src/engine/backup.ts) one job at a time.
//
// A tenant's chunks share segment files with every other tenant's, and its index rows hold keys
// sealed by the master key, so a tenant backup is not a copy of files: it is the tenant's
// objects, read back to their bytes. `<backup.directory>/<name>/`:
//   manifest.json    as a whole-store backup's, with `tenant` (the tenant's id) and the files
//   tenant.json      {tenantId, buckets: [{name, versioning, objectLock}], objects: [{bucket,
//                    key, versionId, lastModified, size, etag, contentType, metadata, headers?,
//                    checksums, tags?, sse?, file}], skipped: [{bucket, key, reason}]}
//   objects/<n>      the bytes of each object (mode 0600)
//
// Invariants:
// - Consistent: every object is read from one snapshot of the index (LMDB's copy of a read
//   transaction, taken as for a whole-store backup, then removed), its chunks from the segments
//   that snapshot references, pinned while the backup runs. The current version of every object
//   is kept; noncurrent versions, delete markers and objects under a customer's key (SSE-C: the
//   store never holds that key) are not (the last are listed in `skipped`).
// - Verified: each object's bytes are authenticated chunk by chunk (AES-GCM) as they are read
//   and their SHA-256 is in the manifest; a restore checks it before it commits the object.
// - Incremental: with `base` (a complete backup of the same tenant), an object whose version
//   (bucket, key, version id, last-modified time) the base holds is hard-linked from it.
// - Atomic as a whole-store backup is (the runner's partial directory and rename).
// - Restore: buckets missing from the target tenant are created (a name held by another tenant
//   fails the restore, naming it); each object is written as new chunk records under the target
//   tenant's keys in the engine's own segment, made durable, and committed by `putObject` (quota,
//   usage, object lock defaults, lifecycle and notifications as any write) together with the
//   job's progress, one object per transaction. An object whose current version in the target
//   already has the backup's ETag, size and checksums is skipped, so a restore cut by a stop or a
//   crash is queued again at the next start and finishes without writing anything twice. The
//   segments written for an object are pinned until it commits, so compaction cannot reclaim
//   them first.
//
// Security: a tenant backup holds the tenant's objects in clear (not the master key); the
// directory is 0700 and every file 0600, and only tokens without a tenant scope see backups.

import { Buffer } from 'node:buffer';
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { link, open, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { chunkIdOf, decodeChunk, encodeChunk, type TenantKeys } from './chunk-codec.js';
import {
  DB,
  bucketKeyPrefix,
  bucketNameKey,
  chunkKey,
  objectKey,
  tenantChildKey,
  tenantChildRange,
  tenantKey,
  type BucketRecord,
  type ChunkRecord,
  type ObjectVersionRecord,
  type TenantRecord,
} from './index/schema.js';
import type { IndexStore } from './index/store.js';
import type { EngineContext } from './ops/context.js';
import { createBucket, putObject, unpackChunkRefs, type ManifestChunk } from './ops/objects.js';
import { BACKUP_NAME, restoreKey, type BackupRecord, type RestoreRecord } from './ops/backup.js';
import { readManifest } from './backup.js';
import type { SegmentReader } from './segments/segment-reader.js';
import type { SegmentWriter } from './segments/segment-writer.js';
import { dedupKey, unwrapTenantKey } from '../security/keys.js';
import { BadRequest, Conflict, CorruptData, NotFound } from '../util/errors.js';

export const TENANT_FILE = 'tenant.json';
/** Records read from the snapshot at a time (bounded memory for a tenant of any size). */
const PAGE = 500;
/** A restored object's chunks (fixed size: the bytes were chunked when first written). */
const RESTORE_CHUNK_BYTES = 1024 * 1024;

export interface TenantBackupObject {
  bucket: string;
  key: string;
  versionId: string;
  lastModified: number;
  size: number;
  etag: string;
  contentType: string;
  metadata: Record<string, string>;
  headers?: Record<string, string>;
  checksums: Record<string, string>;
  tags?: ObjectVersionRecord['tags'];
  sse?: ObjectVersionRecord['sse'];
  /** Its bytes: `objects/<n>`. */
  file: string;
}

export interface TenantBackupIndex {
  tenantId: string;
  buckets: Array<{ name: string; versioning: BucketRecord['versioning']; objectLock: boolean }>;
  objects: TenantBackupObject[];
  skipped: Array<{ bucket: string; key: string; reason: string }>;
}

export interface FileEntry {
  path: string;
  bytes: number;
  sha256: string;
}

/** What the runner lends a tenant backup or restore. */
export interface TenantJobDeps {
  context: EngineContext;
  reader: SegmentReader;
  writer: () => SegmentWriter;
  pins: { set(owner: object, segmentIds: readonly number[]): void; drop(owner: object): void };
  isStopped(): boolean;
}

/** Up to PAGE current versions after `after` (exclusive) within `range`. */
function objectPage(
  copy: IndexStore,
  range: { start: Buffer; end: Buffer },
  after: Buffer | undefined,
): Array<{ key: Buffer; value: ObjectVersionRecord }> {
  const start = after === undefined ? range.start : Buffer.concat([after, Buffer.from([0])]);
  const entries = copy.range<ObjectVersionRecord>(DB.objects, {
    start,
    end: range.end,
    limit: PAGE,
  });
  return [...entries].map((entry) => ({
    key: Buffer.from(entry.key),
    value: entry.value,
  }));
}

function keysOf(master: Buffer, tenant: TenantRecord): TenantKeys {
  const dataKey = unwrapTenantKey(master, tenant.id, Buffer.from(tenant.wrappedKey));
  return {
    tenantNum: tenant.num,
    dataKey,
    dedupKey: dedupKey(dataKey),
    retiredDataKeys: (tenant.retiredKeys ?? []).map((retired) =>
      unwrapTenantKey(master, tenant.id, Buffer.from(retired.wrappedKey)),
    ),
  };
}

function objectId(o: Pick<TenantBackupObject, 'bucket' | 'key' | 'versionId' | 'lastModified'>) {
  return `${o.bucket}\0${o.key}\0${o.versionId}\0${o.lastModified}`;
}

/** A tenant backup's base: its objects by version, and their files. */
export interface TenantBase {
  dir: string;
  objects: Map<string, TenantBackupObject>;
  files: Map<string, FileEntry>;
}

export async function readTenantBase(dir: string, files: FileEntry[]): Promise<TenantBase> {
  const index = JSON.parse(await readFile(join(dir, TENANT_FILE), 'utf8')) as TenantBackupIndex;
  return {
    dir,
    objects: new Map(index.objects.map((o) => [objectId(o), o])),
    files: new Map(files.map((file) => [file.path, file])),
  };
}

/** Progress the runner records. */
export interface TenantProgress {
  objects: number;
  linked: number;
  bytes: number;
}

/**
 * Writes the tenant's objects from the snapshot `copy` (opened under `master`) into `partial`;
 * answers the files written (tenant.json last) and what the backup holds.
 */
export async function writeTenantBackup(
  deps: TenantJobDeps,
  job: BackupRecord,
  snapshot: { copy: IndexStore; master: Buffer },
  partial: string,
  base: TenantBase | undefined,
  progress: (done: TenantProgress) => Promise<void>,
): Promise<{ files: FileEntry[]; counts: NonNullable<BackupRecord['counts']> }> {
  const { copy, master } = snapshot;
  const tenantId = job.tenant ?? '';
  const tenant = copy.get<TenantRecord>(DB.tenants, tenantKey(tenantId));
  if (!tenant || tenant.state === 'deleted') throw NotFound(`tenant ${tenantId} not found`);
  const keys = keysOf(master, tenant);
  const index: TenantBackupIndex = { tenantId: tenant.id, buckets: [], objects: [], skipped: [] };
  const files: FileEntry[] = [];
  const done: TenantProgress = { objects: 0, linked: 0, bytes: 0 };
  let chunks = 0;
  for (const { value: bucket } of [
    ...copy.range<BucketRecord>(DB.buckets, tenantChildRange(tenant.id)),
  ]) {
    index.buckets.push({
      name: bucket.name,
      versioning: bucket.versioning,
      objectLock: bucket.objectLock,
    });
    const range = {
      start: bucketKeyPrefix(bucket.id),
      end: Buffer.concat([bucketKeyPrefix(bucket.id), Buffer.alloc(1, 0xff)]),
    };
    for (let after: Buffer | undefined; ;) {
      const entries = objectPage(copy, range, after);
      if (entries.length === 0) break;
      after = entries[entries.length - 1]?.key;
      for (const { value: version } of entries) {
        if (deps.isStopped()) throw Conflict('the engine is stopping');
        if (version.deleteMarker === true) continue;
        if (version.sseCustomer !== undefined) {
          index.skipped.push({ bucket: bucket.name, key: version.key, reason: 'sse-c' });
          continue;
        }
        const entry = entryOf(bucket.name, version, `objects/${index.objects.length}`);
        const file = await backUpObject(deps, { copy, keys }, version, entry, partial, base);
        index.objects.push(entry);
        files.push(file.entry);
        chunks += unpackChunkRefs(Buffer.from(version.chunks)).length;
        done.objects += 1;
        done.bytes += version.size;
        if (file.linked) done.linked += 1;
        await progress(done);
      }
    }
  }
  const text = Buffer.from(JSON.stringify(index) + '\n');
  files.push({
    ...(await writeFileDurable(join(partial, TENANT_FILE), [text])),
    path: TENANT_FILE,
  });
  const counts = { tenants: 1, buckets: index.buckets.length, versions: done.objects, chunks };
  return { files, counts };
}

function entryOf(bucket: string, version: ObjectVersionRecord, file: string): TenantBackupObject {
  return {
    bucket,
    key: version.key,
    versionId: version.versionId,
    lastModified: version.lastModified,
    size: version.size,
    etag: version.etag,
    contentType: version.contentType,
    metadata: version.metadata,
    ...(version.headers === undefined ? {} : { headers: version.headers }),
    checksums: version.checksums,
    ...(version.tags === undefined ? {} : { tags: version.tags }),
    ...(version.sse === undefined ? {} : { sse: version.sse }),
    file,
  };
}

/** Writes `parts` into a new file, durable; answers its size and SHA-256. */
async function writeFileDurable(path: string, parts: Iterable<Buffer>): Promise<FileEntry> {
  const file = await open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
  const hash = createHash('sha256');
  let bytes = 0;
  try {
    for (const part of parts) {
      await file.write(part, 0, part.length, bytes);
      hash.update(part);
      bytes += part.length;
    }
    await file.datasync();
  } finally {
    await file.close();
  }
  return { path: '', bytes, sha256: hash.digest('hex') };
}

/** One object's bytes into `partial/entry.file` (or a link to the base's copy). */
async function backUpObject(
  deps: TenantJobDeps,
  from: { copy: IndexStore; keys: TenantKeys },
  version: ObjectVersionRecord,
  entry: TenantBackupObject,
  partial: string,
  base: TenantBase | undefined,
): Promise<{ entry: FileEntry; linked: boolean }> {
  const known = base?.objects.get(objectId(entry));
  const knownFile = known === undefined ? undefined : base?.files.get(known.file);
  if (base && known && knownFile && known.etag === entry.etag) {
    await link(join(base.dir, known.file), join(partial, entry.file));
    return { entry: { ...knownFile, path: entry.file }, linked: true };
  }
  const file = await open(
    join(partial, entry.file),
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL,
    0o600,
  );
  const hash = createHash('sha256');
  let bytes = 0;
  try {
    for (const ref of unpackChunkRefs(Buffer.from(version.chunks))) {
      const chunk = from.copy.get<ChunkRecord>(DB.chunks, chunkKey(from.keys.tenantNum, ref.id));
      if (!chunk)
        throw CorruptData(`${entry.bucket}/${entry.key}: a chunk of it has no entry in the index`);
      const record = await deps.reader.read(chunk);
      const plain = decodeChunk(from.keys, record, {
        chunkId: ref.id,
        payloadChecksum: chunk.payloadChecksum,
        plainLength: ref.plainLength,
      });
      await file.write(plain, 0, plain.length, bytes);
      hash.update(plain);
      bytes += plain.length;
    }
    await file.datasync();
  } finally {
    await file.close();
  }
  if (bytes !== version.size)
    throw CorruptData(`${entry.bucket}/${entry.key}: read ${bytes} bytes of ${version.size}`);
  return { entry: { path: entry.file, bytes, sha256: hash.digest('hex') }, linked: false };
}

/** The checks of a backup's tenant.json, against its manifest entry. */
export async function readTenantIndex(
  dir: string,
  files: readonly FileEntry[],
): Promise<TenantBackupIndex> {
  const listed = files.find((file) => file.path === TENANT_FILE);
  if (!listed) throw CorruptData(`${dir} is not a tenant backup (no ${TENANT_FILE})`);
  const bytes = await readFile(join(dir, TENANT_FILE));
  if (createHash('sha256').update(bytes).digest('hex') !== listed.sha256)
    throw CorruptData(`${TENANT_FILE} in backup ${dir} does not match its manifest`);
  return JSON.parse(bytes.toString('utf8')) as TenantBackupIndex;
}

/** The restore's plan: buckets to create, and names another tenant holds. */
export function restorePlan(
  store: IndexStore,
  index: TenantBackupIndex,
  tenantId: string,
): { create: string[]; held: string[] } {
  const create: string[] = [];
  const held: string[] = [];
  for (const bucket of index.buckets) {
    if (store.get(DB.buckets, tenantChildKey(tenantId, bucket.name)) !== undefined) continue;
    const holder = store.get<{ tenantId: string }>(DB.bucketNames, bucketNameKey(bucket.name));
    if (holder !== undefined && holder.tenantId !== tenantId) held.push(bucket.name);
    else create.push(bucket.name);
  }
  return { create, held };
}

export interface RestoreSource {
  dir: string;
  index: TenantBackupIndex;
  files: Map<string, FileEntry>;
}

/**
 * Restores every object of the backup into `job.tenantId`, as the header says; answers when
 * done, or throws what stopped it (the job row says how far it came).
 */
export async function runRestore(
  deps: TenantJobDeps,
  job: RestoreRecord,
  source: RestoreSource,
): Promise<void> {
  const { context } = deps;
  const { store } = context;
  const bytesTotal = source.index.objects.reduce((sum, o) => sum + o.size, 0);
  await updateRestore(context, job.id, { objectsTotal: source.index.objects.length, bytesTotal });
  for (const bucket of source.index.buckets) {
    await store.transact(() => {
      if (store.get(DB.buckets, tenantChildKey(job.tenantId, bucket.name)) !== undefined) return;
      createBucket(context, {
        tenantId: job.tenantId,
        name: bucket.name,
        ...(bucket.versioning === 'Enabled' ? { versioning: 'Enabled' as const } : {}),
        objectLock: bucket.objectLock,
      });
      const current = store.get<RestoreRecord>(DB.meta, restoreKey(job.id));
      if (current)
        store.put(DB.meta, restoreKey(job.id), {
          ...current,
          bucketsCreated: current.bucketsCreated + 1,
        });
    });
  }
  for (const object of source.index.objects) {
    if (deps.isStopped()) throw Conflict('the engine is stopping');
    await restoreObject(deps, job, source, object);
  }
}

async function updateRestore(
  context: EngineContext,
  id: string,
  change: Partial<RestoreRecord>,
): Promise<void> {
  await context.store.transact(() => {
    const current = context.store.get<RestoreRecord>(DB.meta, restoreKey(id));
    if (current) context.store.put(DB.meta, restoreKey(id), { ...current, ...change });
  });
}

function sameObject(current: ObjectVersionRecord | undefined, o: TenantBackupObject): boolean {
  if (!current || current.deleteMarker === true) return false;
  const a = current.checksums;
  const b = o.checksums;
  return (
    current.etag === o.etag &&
    current.size === o.size &&
    Object.keys(b).length === Object.keys(a).length &&
    Object.keys(b).every((name) => a[name] === b[name])
  );
}

/** The target tenant's keys and bucket, read afresh for each object (a rotation may come). */
function targetOf(
  context: EngineContext,
  tenantId: string,
  bucketName: string,
): { keys: TenantKeys; bucket: BucketRecord } {
  const tenant = context.store.get<TenantRecord>(DB.tenants, tenantKey(tenantId));
  if (!tenant || tenant.state !== 'active')
    throw Conflict(`tenant ${tenantId} is ${tenant?.state ?? 'gone'}; the restore stops`);
  const bucket = context.store.get<BucketRecord>(DB.buckets, tenantChildKey(tenantId, bucketName));
  if (!bucket) throw NotFound(`bucket ${bucketName} was deleted during the restore`);
  return { keys: keysOf(context.masterKey, tenant), bucket };
}

async function restoreObject(
  deps: TenantJobDeps,
  job: RestoreRecord,
  source: RestoreSource,
  object: TenantBackupObject,
): Promise<void> {
  const { context } = deps;
  const { store } = context;
  const { keys, bucket } = targetOf(context, job.tenantId, object.bucket);
  const listed = source.files.get(object.file);
  if (!listed) throw CorruptData(`${object.file} is not in the backup's manifest`);
  if (sameObject(store.get(DB.objects, objectKey(bucket.id, object.key)), object)) {
    await store.transact(() => bumpRestore(context, job.id, { skipped: 1, bytes: object.size }));
    return;
  }
  const owner = {};
  try {
    const chunks = await writeChunks(deps, owner, keys, join(source.dir, object.file), listed);
    await store.transact(() => {
      putObject(context, {
        tenantId: job.tenantId,
        bucket: object.bucket,
        key: object.key,
        size: object.size,
        etag: object.etag,
        contentType: object.contentType,
        metadata: object.metadata,
        ...(object.headers === undefined ? {} : { headers: object.headers }),
        checksums: object.checksums,
        compressed: chunks.compressed,
        chunks: chunks.list,
        bucketId: bucket.id,
        ...(object.tags === undefined ? {} : { tags: object.tags }),
        ...(object.sse === undefined ? {} : { sse: object.sse }),
      });
      bumpRestore(context, job.id, { done: 1, bytes: object.size });
    });
  } finally {
    deps.pins.drop(owner);
  }
}

function bumpRestore(
  context: EngineContext,
  id: string,
  by: { done?: number; skipped?: number; bytes: number },
): void {
  const current = context.store.get<RestoreRecord>(DB.meta, restoreKey(id));
  if (!current) return;
  context.store.put(DB.meta, restoreKey(id), {
    ...current,
    objectsDone: current.objectsDone + (by.done ?? 0),
    objectsSkipped: current.objectsSkipped + (by.skipped ?? 0),
    bytesDone: current.bytesDone + by.bytes,
  });
}

/**
 * Reads a backed-up object's file in fixed chunks, writes each as a record under `keys` and
 * makes it durable (its segments pinned to `owner`); checks the file's size and SHA-256 against
 * the manifest before answering the chunks to commit.
 */
async function writeChunks(
  deps: TenantJobDeps,
  owner: object,
  keys: TenantKeys,
  path: string,
  listed: FileEntry,
): Promise<{ list: ManifestChunk[]; compressed: boolean }> {
  const file = await open(path, constants.O_RDONLY);
  const hash = createHash('sha256');
  const list: ManifestChunk[] = [];
  const segments = new Set<number>();
  let compressed = false;
  let bytes = 0;
  try {
    for (;;) {
      const buffer = Buffer.allocUnsafe(RESTORE_CHUNK_BYTES);
      const { bytesRead } = await file.read(buffer, 0, RESTORE_CHUNK_BYTES, bytes);
      if (bytesRead === 0) break;
      const plain = buffer.subarray(0, bytesRead);
      hash.update(plain);
      bytes += bytesRead;
      const id = chunkIdOf(keys.dedupKey, [plain]);
      const encoded = encodeChunk(keys, id, [plain], plain.length);
      compressed ||= encoded.compressed;
      const appended = await deps.writer().append([encoded.header, ...encoded.payload]);
      segments.add(appended.segmentId);
      deps.pins.set(owner, [...segments]);
      await appended.durable();
      list.push({
        id,
        plainLength: plain.length,
        location: {
          segmentId: appended.segmentId,
          offset: appended.offset,
          length: appended.length,
          payloadChecksum: encoded.payloadChecksum,
        },
      });
    }
  } finally {
    await file.close();
  }
  if (bytes !== listed.bytes || hash.digest('hex') !== listed.sha256)
    throw CorruptData(
      `${listed.path} in the backup does not match its manifest; the restore stops`,
    );
  return { list, compressed };
}

/** What `planRestore` answers: the restore's counts, and the names that would stop it. */
export interface RestorePlan {
  backup: string;
  tenantId: string;
  objects: number;
  bytes: number;
  buckets: number;
  bucketsToCreate: string[];
  /** Bucket names another tenant holds: the restore would fail on them. */
  bucketsHeld: string[];
  /** Objects the backup did not keep (SSE-C). */
  skipped: number;
}

/**
 * The plan of restoring tenant backup `backup` into `tenantId`, read from the backup's files
 * (checked against its manifest) and the index. A read-only engine command.
 */
export async function planRestore(
  context: EngineContext,
  args: { backup: string; tenantId: string },
): Promise<RestorePlan> {
  const root = context.settings.string('backup.directory');
  if (root === '')
    throw Conflict('backups are off: set backup.directory to the directory that receives them');
  if (typeof args.backup !== 'string' || !BACKUP_NAME.test(args.backup))
    throw BadRequest('backup must be the name of a backup');
  if (typeof args.tenantId !== 'string') throw BadRequest('tenantId must be a tenant id');
  const dir = join(root, args.backup);
  const manifest = await readManifest(dir);
  if (manifest.tenant === undefined)
    throw Conflict(
      `backup ${args.backup} is of the whole store: it is restored offline, into an empty data ` +
        'directory (lightwell restore)',
    );
  const index = await readTenantIndex(dir, manifest.files);
  const { create, held } = restorePlan(context.store, index, args.tenantId);
  return {
    backup: args.backup,
    tenantId: args.tenantId,
    objects: index.objects.length,
    bytes: index.objects.reduce((sum, o) => sum + o.size, 0),
    buckets: index.buckets.length,
    bucketsToCreate: create,
    bucketsHeld: held,
    skipped: index.skipped.length,
  };
}
