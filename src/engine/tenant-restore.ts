// Restore of a tenant backup (tenant-backup.ts) into a tenant of the running store, the same
// tenant or another, run by the engine's backup runner (src/engine/backup.ts).
//
// Invariants:
// - Verified before anything is written: the records file is read whole once (its frames
//   authenticated, its SHA-256 checked against the manifest, its header's tenant against the
//   manifest's, its end record found), and so is every version's file (frames authenticated,
//   sizes and SHA-256 against its record); each file is checked again as it is restored, before
//   its version commits (a file changed in between stops the restore there).
// - Faithful: a bucket the target lacks is made with every setting of the backup (docs/
//   console.md lists what a restore into another tenant changes); a bucket the target holds
//   keeps its own settings. Every version keeps its version id, sequence number, last-modified
//   time, ETag, checksums, part sizes, tags, retention and legal hold; noncurrent versions stay
//   noncurrent and delete markers come back. SSE-KMS key ids name the target tenant's keys.
// - One version per transaction: its chunks are written under the target tenant's keys in the
//   runner's own segment, made durable and pinned until the version commits together with the
//   job's progress and its cursor (`recordsDone`, the version records behind it). A restore cut
//   by a stop or a crash is queued again at the next start and resumes at its cursor, so no
//   version is written or counted twice; a version already in place (the same sequence number
//   and content) is skipped, so a restore into the tenant backed up writes only what went.
// - Quota and usage as any write; no event notifications (a restore is not a client's write).

import { Buffer } from 'node:buffer';
import { randomBytes } from 'node:crypto';
import { rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { chunkIdOf, encodeChunk, type TenantKeys } from './chunk-codec.js';
import {
  DB,
  META_COUNTERS,
  bucketKeyPrefix,
  bucketNameKey,
  objectKey,
  tenantChildKey,
  tenantKey,
  versionKey,
  type BucketNotificationsRecord,
  type BucketRecord,
  type Counters,
  type ObjectVersionRecord,
  type ServerSideEncryption,
  type TenantRecord,
} from './index/schema.js';
import type { IndexStore } from './index/store.js';
import type { EngineContext } from './ops/context.js';
import {
  addChunkRefs,
  createBucket,
  findNullVersion,
  loadUsage,
  packChunkRefs,
  refreshCurrent,
  saveUsage,
  writeVersion,
  type ManifestChunk,
} from './ops/objects.js';
import { checkQuota } from './ops/quota.js';
import { reindexVersion } from './ops/lifecycle-index.js';
import { requireActiveTenant } from './ops/control.js';
import {
  BACKUP_NAME,
  backupKey,
  restoreKey,
  type BackupRecord,
  type RestoreRecord,
} from './ops/backup.js';
import { fetchBackup } from './backup-upload.js';
import { backupKeyFromIndex } from './ops/backup-keys.js';
import { readManifest, type BackupManifest } from './backup.js';
import { readSealed, unwrapBackupKey } from './backup-seal.js';
import { masterKeyFingerprint } from './master-key-rotation.js';
import {
  BUCKET_SETTINGS,
  RECORDS_FILE,
  readRecords,
  type BucketBackupRecord,
  type EndRecord,
  type VersionBackupRecord,
  type VersionFile,
} from './tenant-backup-records.js';
import { keysOf, type TenantJobDeps, type TenantManifestPart } from './tenant-backup.js';
import { PURPOSE_SECRET_SEAL, deriveKey, sealSecret } from '../security/keys.js';
import { BadRequest, Conflict, CorruptData, NotFound } from '../util/errors.js';

/** Version records the restore passes (in place, or before its cursor) between progress rows. */
const SKIP_FLUSH = 256;

/** A tenant backup, opened: where it is, its manifest, its data key. */
export interface RestoreSource {
  dir: string;
  manifest: BackupManifest & TenantManifestPart;
  key: Buffer;
}

/** Opens tenant backup `dir` under the store's master key. */
export async function openTenantBackup(context: EngineContext, dir: string) {
  const manifest = await readManifest(dir);
  if (manifest.tenant === undefined)
    throw Conflict(
      `${dir} is a backup of the whole store: it is restored offline, into an empty data ` +
        'directory (lightwell restore)',
    );
  if (manifest.version !== 2 || manifest.encryption === undefined || !manifest.records)
    throw CorruptData(`${dir} is a tenant backup of an earlier format; take a new backup`);
  const fingerprint = masterKeyFingerprint(context.masterKey);
  // Taken under an earlier master key: the index keeps its chain's key, re-wrapped.
  const kept =
    manifest.encryption.masterKey === fingerprint
      ? undefined
      : backupKeyFromIndex(context.store, context.masterKey, manifest.encryption.keyId);
  const key = kept ?? unwrapBackupKey(context.masterKey, fingerprint, manifest.encryption);
  return { dir, manifest: manifest as BackupManifest & TenantManifestPart, key };
}

function recordsOf(source: RestoreSource) {
  return readRecords(
    join(source.dir, RECORDS_FILE),
    source.key,
    source.manifest.records.nonce,
    source.manifest.tenant,
  );
}

/** A version's file in the backup: a path inside it, or corrupt_data. */
function filePath(source: RestoreSource, record: VersionBackupRecord): string {
  const file = record.file;
  if (!file || file.path.startsWith('/') || file.path.split('/').includes('..'))
    throw CorruptData(`${record.bucket}/${record.key}: its record names no file of the backup`);
  return join(source.dir, file.path);
}

/** Reads a version's sealed file whole (every frame authenticated) against its record. */
async function verifyFile(source: RestoreSource, record: VersionBackupRecord): Promise<void> {
  const path = filePath(source, record);
  const file = record.file as VersionFile;
  let read: { bytes: number; plainBytes: number; sha256: string } | undefined;
  for await (const _plain of readSealed(path, source.key, file.nonce, (done) => (read = done)));
  const done = read as { bytes: number; plainBytes: number; sha256: string } | undefined;
  if (
    !done ||
    done.bytes !== file.bytes ||
    done.plainBytes !== record.size ||
    done.sha256 !== file.sha256
  )
    throw CorruptData(`${file.path} in the backup does not match its record; nothing was restored`);
}

/**
 * Reads every record once, checking the file against the manifest (and with `files`, every
 * version's file against its record: nothing is written before all of it is checked); answers
 * its buckets.
 */
async function scan(source: RestoreSource, options: { files: boolean; isStopped: () => boolean }) {
  const listed = source.manifest.files.find((file) => file.path === RECORDS_FILE);
  if (!listed) throw CorruptData(`${source.dir} lists no ${RECORDS_FILE}`);
  const buckets: string[] = [];
  let checked: { bytes: number; fileSha256: string } | undefined;
  const records = readRecords(
    join(source.dir, RECORDS_FILE),
    source.key,
    source.manifest.records.nonce,
    source.manifest.tenant,
    (file) => (checked = file),
  );
  let end: EndRecord;
  for (;;) {
    const step = await records.next();
    if (step.done === true) {
      end = step.value;
      break;
    }
    if (options.isStopped()) throw Conflict('the engine is stopping');
    const record = step.value;
    if (record.type === 'bucket') buckets.push(record.name);
    if (options.files && record.type === 'version' && record.deleteMarker !== true)
      await verifyFile(source, record);
  }
  const found = checked as { bytes: number; fileSha256: string } | undefined;
  if (!found || found.bytes !== listed.bytes || found.fileSha256 !== listed.sha256)
    throw CorruptData(`${RECORDS_FILE} in backup ${source.dir} does not match its manifest`);
  return { buckets, end };
}

/**
 * The directory to plan backup `name` from: its own, or when that is gone and the backup has a
 * target, a fetched copy of its manifest and records (removed after the plan).
 */
async function planningCopy(context: EngineContext, root: string, name: string) {
  const dir = join(root, name);
  const job = context.store.get<BackupRecord>(DB.meta, backupKey(name));
  const here = await stat(join(dir, 'manifest.json')).then(
    () => true,
    () => false,
  );
  if (here || job?.target === undefined) return { dir, fetched: false };
  const into = join(root, `.${name}.plan-${randomBytes(6).toString('hex')}`);
  await fetchBackup(context, { name, target: job.target }, root, { recordsOnly: into });
  return { dir: into, fetched: true };
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
  /** Versions the backup did not keep (SSE-C). */
  skipped: number;
}

function restorePlan(store: IndexStore, buckets: readonly string[], tenantId: string) {
  const create: string[] = [];
  const held: string[] = [];
  for (const name of buckets) {
    if (store.get(DB.buckets, tenantChildKey(tenantId, name)) !== undefined) continue;
    const holder = store.get<{ tenantId: string }>(DB.bucketNames, bucketNameKey(name));
    if (holder !== undefined && holder.tenantId !== tenantId) held.push(name);
    else create.push(name);
  }
  return { create, held };
}

/**
 * The plan of restoring tenant backup `backup` into `tenantId`, read from the backup's records
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
  const { dir, fetched } = await planningCopy(context, root, args.backup);
  let planned: Awaited<ReturnType<typeof scan>>;
  try {
    const source = await openTenantBackup(context, dir);
    planned = await scan(source, { files: false, isStopped: () => false });
  } finally {
    if (fetched) await rm(dir, { recursive: true, force: true });
  }
  const { buckets, end } = planned;
  const { create, held } = restorePlan(context.store, buckets, args.tenantId);
  return {
    backup: args.backup,
    tenantId: args.tenantId,
    objects: end.versions,
    bytes: end.bytes,
    buckets: end.buckets,
    bucketsToCreate: create,
    bucketsHeld: held,
    skipped: end.skipped,
  };
}

/** Skips not yet in a progress row: written with the next one. */
interface Pending {
  records: number;
  skipped: number;
  bytes: number;
}

/**
 * Restores every bucket and version of the backup into `job.tenantId`, as the header says;
 * answers when done, or throws what stopped it (the job row says how far it came).
 */
export async function runRestore(
  deps: TenantJobDeps,
  job: RestoreRecord,
  source: RestoreSource,
): Promise<void> {
  const { context } = deps;
  const { end } = await scan(source, { files: true, isStopped: () => deps.isStopped() });
  await updateRestore(context, job.id, { objectsTotal: end.versions, bytesTotal: end.bytes });
  const from = source.manifest.tenant;
  const cursor = job.recordsDone ?? 0;
  const pending: Pending = { records: 0, skipped: 0, bytes: 0 };
  let index = 0;
  for await (const record of recordsOf(source)) {
    if (deps.isStopped()) throw Conflict('the engine is stopping');
    if (record.type === 'bucket') {
      await context.store.transact(() => ensureBucket(context, job, record, from));
      continue;
    }
    if (record.type !== 'version') continue;
    index += 1;
    if (index <= cursor) continue; // committed before the restore was cut
    pending.records += 1;
    const written = await restoreVersion(deps, job, source, record, pending);
    if (!written) {
      pending.skipped += 1;
      pending.bytes += record.deleteMarker === true ? 0 : record.size;
      if (pending.records >= SKIP_FLUSH) await flush(context, job.id, pending);
    }
  }
  await flush(context, job.id, pending);
}

async function flush(context: EngineContext, id: string, pending: Pending): Promise<void> {
  if (pending.records === 0) return;
  await context.store.transact(() => bumpRestore(context, id, pending, { done: 0, bytes: 0 }));
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

/** Adds the pending skips and one written version to the job row, in the caller's transaction. */
function bumpRestore(
  context: EngineContext,
  id: string,
  pending: Pending,
  written: { done: number; bytes: number },
): void {
  const current = context.store.get<RestoreRecord>(DB.meta, restoreKey(id));
  if (current)
    context.store.put(DB.meta, restoreKey(id), {
      ...current,
      recordsDone: (current.recordsDone ?? 0) + pending.records,
      objectsDone: current.objectsDone + written.done,
      objectsSkipped: current.objectsSkipped + pending.skipped,
      bytesDone: current.bytesDone + pending.bytes + written.bytes,
    });
  pending.records = 0;
  pending.skipped = 0;
  pending.bytes = 0;
}

/** Makes the bucket with the backup's settings unless the target holds it; in a transaction. */
function ensureBucket(
  context: EngineContext,
  job: RestoreRecord,
  record: BucketBackupRecord,
  from: string,
): void {
  const { store } = context;
  if (store.get(DB.buckets, tenantChildKey(job.tenantId, record.name)) !== undefined) return;
  const created = createBucket(context, {
    tenantId: job.tenantId,
    name: record.name,
    objectLock: record.objectLock,
  });
  const bucket: BucketRecord = { ...created, versioning: record.versioning };
  for (const name of BUCKET_SETTINGS)
    if (record[name] !== undefined) Object.assign(bucket, { [name]: record[name] });
  // An ACL names the accounts of the tenant it was set in: it means nothing in another.
  if (job.tenantId !== from) delete bucket.acl;
  const { notifications } = record;
  store.put(DB.buckets, tenantChildKey(job.tenantId, record.name), bucket);
  if (notifications && notifications.length > 0) {
    const seal = deriveKey(context.masterKey, PURPOSE_SECRET_SEAL);
    const row: BucketNotificationsRecord = {
      tenantId: job.tenantId,
      bucketId: bucket.id,
      bucket: bucket.name,
      configs: notifications.map(({ secret, ...config }) => ({
        ...config,
        sealedSecret:
          secret === ''
            ? Buffer.alloc(0)
            : sealSecret(
                seal,
                Buffer.from(secret, 'base64'),
                `webhook:${job.tenantId}:${String(bucket.id)}:${config.id}`,
              ),
      })),
      updatedAt: context.now(),
    };
    store.put(DB.notifications, bucketKeyPrefix(bucket.id), row);
  }
  const current = store.get<RestoreRecord>(DB.meta, restoreKey(job.id));
  if (current)
    store.put(DB.meta, restoreKey(job.id), {
      ...current,
      bucketsCreated: current.bucketsCreated + 1,
    });
}

/** The target tenant's keys and bucket, read afresh for each version (a rotation may come). */
function targetOf(context: EngineContext, tenantId: string, bucketName: string) {
  const tenant = context.store.get<TenantRecord>(DB.tenants, tenantKey(tenantId));
  if (!tenant || tenant.state !== 'active')
    throw Conflict(`tenant ${tenantId} is ${tenant?.state ?? 'gone'}; the restore stops`);
  const bucket = context.store.get<BucketRecord>(DB.buckets, tenantChildKey(tenantId, bucketName));
  if (!bucket) throw NotFound(`bucket ${bucketName} was deleted during the restore`);
  return { tenant, keys: keysOf(context.masterKey, tenant), bucket };
}

function sameVersion(found: ObjectVersionRecord, record: VersionBackupRecord): boolean {
  const a = found.checksums;
  const b = record.checksums;
  return (
    found.versionId === record.versionId &&
    (found.deleteMarker === true) === (record.deleteMarker === true) &&
    found.etag === record.etag &&
    found.size === record.size &&
    Object.keys(b).length === Object.keys(a).length &&
    Object.keys(b).every((name) => a[name] === b[name])
  );
}

/** True when the target holds the version already; a Conflict when it holds another there. */
function inPlace(store: IndexStore, bucket: BucketRecord, record: VersionBackupRecord): boolean {
  const found = store.get<ObjectVersionRecord>(
    DB.versions,
    versionKey(bucket.id, record.key, record.seq),
  );
  if (!found) return false;
  if (sameVersion(found, record)) return true;
  throw Conflict(
    `${bucket.name}/${record.key}: version ${record.versionId} is another version in the target ` +
      '(the backup is of another store); the restore stops',
  );
}

/** Writes one version (false when it was in place), with the pending skips in its row. */
async function restoreVersion(
  deps: TenantJobDeps,
  job: RestoreRecord,
  source: RestoreSource,
  record: VersionBackupRecord,
  pending: Pending,
): Promise<boolean> {
  const { context } = deps;
  const { keys, bucket } = targetOf(context, job.tenantId, record.bucket);
  if (inPlace(context.store, bucket, record)) return false;
  const owner = {};
  try {
    const chunks =
      record.deleteMarker === true
        ? { list: [], compressed: false }
        : await writeChunks(deps, owner, keys, source, record);
    return await context.store.transact(() => {
      const tenant = requireActiveTenant(context, job.tenantId);
      const target = context.store.get<BucketRecord>(
        DB.buckets,
        tenantChildKey(tenant.id, record.bucket),
      );
      if (!target || target.id !== bucket.id)
        throw NotFound(`bucket ${record.bucket} was deleted during the restore`);
      if (inPlace(context.store, target, record)) {
        pending.skipped += 1;
        pending.bytes += record.size;
        bumpRestore(context, job.id, pending, { done: 0, bytes: 0 });
        return true;
      }
      commitVersion(
        context,
        { tenant, bucket: target, record, from: source.manifest.tenant },
        chunks,
      );
      bumpRestore(context, job.id, pending, { done: 1, bytes: record.size });
      return true;
    });
  } finally {
    deps.pins.drop(owner);
  }
}

/**
 * The version as the backup has it, in the target's bucket: usage, quota, chunk references
 * and the lifecycle index as any write; the key's newest version stays its current one.
 */
function commitVersion(
  context: EngineContext,
  at: { tenant: TenantRecord; bucket: BucketRecord; record: VersionBackupRecord; from: string },
  chunks: { list: ManifestChunk[]; compressed: boolean },
): void {
  const { tenant, bucket, record } = at;
  const { type: _type, bucket: _bucket, file: _file, ...fields } = record;
  const marker = record.deleteMarker === true;
  const current = context.store.get(DB.objects, objectKey(bucket.id, record.key));
  const replaced =
    record.versionId === 'null' ? findNullVersion(context, bucket.id, record.key) : undefined;
  checkQuota(
    context,
    tenant.id,
    (marker ? 0 : record.size) - (replaced?.size ?? 0),
    current || marker ? 0 : 1,
  );
  const usage = loadUsage(context, tenant.id);
  const storedBytes = marker ? 0 : addChunkRefs(context, tenant.num, chunks.list, usage);
  const version: ObjectVersionRecord = {
    ...fields,
    chunks: packChunkRefs(chunks.list),
    storedBytes,
    compressed: chunks.compressed,
  };
  const sse = sseIn(tenant, at.from, record.sse);
  if (sse === undefined) delete version.sse;
  else version.sse = sse;
  writeVersion(context, { tenant, bucket, version, usage });
  refreshCurrent(context, bucket, record.key, usage);
  if (bucket.lifecycle && bucket.lifecycle.length > 0) reindexVersion(context, bucket, version);
  saveUsage(context, usage);
  // Later writes take sequence numbers above every restored one (a backup of another store).
  const counters = context.store.get<Counters>(DB.meta, META_COUNTERS);
  if (counters && counters.nextSeq <= record.seq)
    context.store.put(DB.meta, META_COUNTERS, { ...counters, nextSeq: record.seq + 1 });
}

/**
 * A version's SSE-KMS key id in the target tenant: the tenant's own id (its data key) becomes
 * the target's id; a named key is kept when the target holds a key of that id, else the version
 * reports the target's data key. Every byte is under the target's data key either way.
 */
function sseIn(
  tenant: TenantRecord,
  from: string,
  sse: ServerSideEncryption | undefined,
): ServerSideEncryption | undefined {
  if (sse?.algorithm !== 'aws:kms' || sse.kmsKeyId === undefined || tenant.id === from) return sse;
  const named = (tenant.kmsKeys ?? []).some((key) => key.id === sse.kmsKeyId);
  return named ? sse : { algorithm: 'aws:kms', kmsKeyId: tenant.id };
}

/**
 * Reads a version's sealed file frame by frame (a frame is one chunk), writes each as a record
 * under `keys` and makes it durable (its segments pinned to `owner`); checks the size and
 * SHA-256 against the record before answering the chunks to commit.
 */
async function writeChunks(
  deps: TenantJobDeps,
  owner: object,
  keys: TenantKeys,
  source: RestoreSource,
  record: VersionBackupRecord,
): Promise<{ list: ManifestChunk[]; compressed: boolean }> {
  const path = filePath(source, record);
  const file = record.file as VersionFile;
  const list: ManifestChunk[] = [];
  const segments = new Set<number>();
  let compressed = false;
  let read: { plainBytes: number; sha256: string; bytes: number } | undefined;
  for await (const plain of readSealed(path, source.key, file.nonce, (done) => (read = done))) {
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
  const done = read as { plainBytes: number; sha256: string; bytes: number } | undefined;
  if (!done || done.plainBytes !== record.size || done.sha256 !== file.sha256)
    throw CorruptData(`${file.path} in the backup does not match its record; the restore stops`);
  return { list, compressed };
}
