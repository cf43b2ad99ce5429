// Backup of one tenant, run by the engine's backup runner (src/engine/backup.ts) one job at a
// time; its restore is tenant-restore.ts.
//
// A tenant's chunks share segment files with every other tenant's, and its index rows hold keys
// sealed by the master key, so a tenant backup is not a copy of files: it is the tenant's
// buckets and versions, read back to their bytes. `<backup.directory>/<name>/`:
//   manifest.json    as a whole-store backup's (version 2), with `tenant`, `encryption` (the
//                    backup's data key, wrapped: backup-seal.ts), `records` (the records file's
//                    nonce) and `totals`; `files` lists the records file alone
//   records          every bucket (with its settings) and version, one record a line
//                    (tenant-backup-records.ts), sealed
//   objects/<n>      the bytes of each version, sealed; its record holds its size and SHA-256
//
// Invariants:
// - Consistent: every record is read from one snapshot of the index (LMDB's copy of a read
//   transaction, taken as for a whole-store backup, then removed), the chunks from the segments
//   that snapshot references, pinned while the backup runs.
// - Complete: every version of every bucket, current and noncurrent, delete markers, retention
//   and legal holds, tags, multipart part sizes and checksums, and every bucket setting
//   (versioning, object lock and its default retention, tags, encryption, CORS, policy, ACL,
//   public access block, lifecycle, logging, ownership, notifications with their secrets).
//   Versions under a customer's key (SSE-C: the store never holds that key) are not kept; a
//   `skipped` record names each.
// - Bounded memory: the snapshot is read a page at a time and the records are streamed to
//   their file; an incremental backup walks its base's records alongside, in the same order.
// - Verified: each version's bytes are authenticated chunk by chunk (AES-GCM) as they are read
//   and their SHA-256 is in their record; every file is sealed (AES-256-GCM frames), so a
//   restore detects any change, truncation or swap.
// - Incremental: with `base` (a complete backup of the same tenant), a version (bucket, key,
//   sequence number, ETag) the base holds is hard-linked from it, and the backup keeps the
//   base's data key (from the index, re-wrapped, when the master key rotated since) so that the
//   link stays readable.
// - Atomic as a whole-store backup is (the runner's partial directory and rename).
//
// Security: docs/console.md ("Backups: threat model"). The directory is 0700, every file 0600.

import { Buffer } from 'node:buffer';
import { link } from 'node:fs/promises';
import { join } from 'node:path';
import { decodeChunk, type TenantKeys } from './chunk-codec.js';
import {
  DB,
  bucketKeyPrefix,
  chunkKey,
  tenantChildRange,
  tenantKey,
  type BucketNotificationsRecord,
  type BucketRecord,
  type ChunkRecord,
  type ObjectVersionRecord,
  type TenantRecord,
} from './index/schema.js';
import type { IndexStore } from './index/store.js';
import type { EngineContext } from './ops/context.js';
import { unpackChunkRefs } from './ops/objects.js';
import type { BackupRecord } from './ops/backup.js';
import type { SegmentReader } from './segments/segment-reader.js';
import type { SegmentWriter } from './segments/segment-writer.js';
import {
  SealedWriter,
  newBackupKey,
  newFileNonce,
  unwrapBackupKey,
  wrapBackupKey,
  type BackupKeyRecord,
} from './backup-seal.js';
import { backupKeyFromIndex } from './ops/backup-keys.js';
import {
  BUCKET_SETTINGS,
  RECORDS_FILE,
  RECORDS_FORMAT,
  RECORDS_VERSION,
  RecordsWriter,
  readRecords,
  type BucketBackupRecord,
  type VersionBackupRecord,
  type VersionFile,
} from './tenant-backup-records.js';
import {
  PURPOSE_SECRET_SEAL,
  dedupKey,
  deriveKey,
  openSecret,
  unwrapTenantKey,
} from '../security/keys.js';
import { Conflict, CorruptData, NotFound } from '../util/errors.js';

/** Records read from the snapshot at a time (bounded memory for a tenant of any size). */
const PAGE = 500;
/** Versions between two progress rows (each is a write transaction of the index). */
const PROGRESS_EVERY = 64;

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

/** What a tenant backup's manifest adds to a whole-store one. */
export interface TenantManifestPart {
  tenant: string;
  encryption: BackupKeyRecord;
  records: { nonce: string };
  totals: { versions: number; bytes: number };
}

export function keysOf(master: Buffer, tenant: TenantRecord): TenantKeys {
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

/** A base backup, as the runner found it: its directory and manifest's tenant part. */
export interface TenantBase {
  dir: string;
  part: TenantManifestPart;
}

/** Progress the runner records. */
export interface TenantProgress {
  objects: number;
  linked: number;
  bytes: number;
}

/** Orders records as the index does: bucket name, key (UTF-8 bytes), newest version first. */
function compareVersions(
  a: { bucket: string; key: string; seq: number },
  b: { bucket: string; key: string; seq: number },
): number {
  return (
    Buffer.compare(Buffer.from(a.bucket), Buffer.from(b.bucket)) ||
    Buffer.compare(Buffer.from(a.key), Buffer.from(b.key)) ||
    b.seq - a.seq
  );
}

/** Walks a base's version records alongside the backup (both in index order). */
export class BaseCursor {
  private next: VersionBackupRecord | undefined;
  private ended = false;

  constructor(private readonly records: AsyncGenerator<unknown, unknown>) {}

  /** The base's record of the version `want`, if it holds it. */
  async find(want: VersionBackupRecord): Promise<VersionBackupRecord | undefined> {
    for (;;) {
      if (!this.next) {
        if (this.ended) return undefined;
        const step = await this.records.next();
        if (step.done === true) {
          this.ended = true;
          return undefined;
        }
        const record = step.value as { type: string };
        if (record.type === 'version') this.next = record as VersionBackupRecord;
        continue;
      }
      const order = compareVersions(this.next, want);
      if (order > 0) return undefined;
      const found = this.next;
      this.next = undefined;
      if (order === 0) return found;
    }
  }

  async close(): Promise<void> {
    await this.records.return(undefined);
  }
}

/** The data key and the base's cursor: the base's key when it opens, else a new one. */
function backupKeyOf(
  snapshot: { copy: IndexStore; master: Buffer; fingerprint: string },
  base: TenantBase | undefined,
): { key: Buffer; record: BackupKeyRecord; base: TenantBase | undefined } {
  const { master, fingerprint } = snapshot;
  if (base) {
    const { encryption } = base.part;
    if (encryption.masterKey === fingerprint)
      return { key: unwrapBackupKey(master, fingerprint, encryption), record: encryption, base };
    // Taken under an earlier master key: its chain's key, re-wrapped, is in the index (unless
    // an earlier Lightwell took it; this backup then starts a chain of its own).
    const key = backupKeyFromIndex(snapshot.copy, master, encryption.keyId);
    if (key)
      return { key, record: wrapBackupKey(master, fingerprint, encryption.keyId, key), base };
  }
  return { ...newBackupKey(master, fingerprint), base: undefined };
}

interface Walk {
  copy: IndexStore;
  master: Buffer;
  tenantKeys: TenantKeys;
  key: Buffer;
  partial: string;
  base: { dir: string; cursor: BaseCursor } | undefined;
  records: RecordsWriter;
  done: TenantProgress;
  files: number;
  chunks: number;
  skipped: number;
  buckets: number;
}

/**
 * Writes the tenant's records and versions from the snapshot `copy` (opened under `master`)
 * into `partial`; answers the manifest's tenant part, its files and what the backup holds.
 */
export async function writeTenantBackup(
  deps: TenantJobDeps,
  job: BackupRecord,
  snapshot: { copy: IndexStore; master: Buffer; fingerprint: string; at: number },
  partial: string,
  baseFound: TenantBase | undefined,
  progress: (done: TenantProgress) => Promise<void>,
): Promise<{ part: TenantManifestPart; files: FileEntry[]; counts: BackupCounts }> {
  const { copy, master } = snapshot;
  const tenantId = job.tenant ?? '';
  const tenant = copy.get<TenantRecord>(DB.tenants, tenantKey(tenantId));
  if (!tenant || tenant.state === 'deleted') throw NotFound(`tenant ${tenantId} not found`);
  const chosen = backupKeyOf(snapshot, baseFound);
  const nonce = newFileNonce();
  const records = await RecordsWriter.create(join(partial, RECORDS_FILE), chosen.key, nonce);
  const walk: Walk = {
    copy,
    master,
    tenantKeys: keysOf(master, tenant),
    key: chosen.key,
    partial,
    base: undefined,
    records,
    done: { objects: 0, linked: 0, bytes: 0 },
    files: 0,
    chunks: 0,
    skipped: 0,
    buckets: 0,
  };
  if (chosen.base) {
    const { dir, part } = chosen.base;
    const base = readRecords(join(dir, RECORDS_FILE), chosen.key, part.records.nonce, part.tenant);
    walk.base = { dir, cursor: new BaseCursor(base) };
  }
  try {
    await records.add({
      type: 'header',
      format: RECORDS_FORMAT,
      version: RECORDS_VERSION,
      tenantId: tenant.id,
      snapshotAt: snapshot.at,
    });
    for (const { value: bucket } of [
      ...copy.range<BucketRecord>(DB.buckets, tenantChildRange(tenant.id)),
    ]) {
      walk.buckets += 1;
      await records.add(bucketRecordOf(copy, master, bucket));
      await backUpBucket(deps, walk, bucket, progress);
    }
    await progress(walk.done);
    await records.add({
      type: 'end',
      buckets: walk.buckets,
      versions: walk.done.objects,
      skipped: walk.skipped,
      bytes: walk.done.bytes,
    });
  } catch (error) {
    await records.abandon().catch(() => undefined);
    throw error;
  } finally {
    await walk.base?.cursor.close();
  }
  const sealed = await records.finish();
  const part: TenantManifestPart = {
    tenant: tenant.id,
    encryption: chosen.record,
    records: { nonce },
    totals: { versions: walk.done.objects, bytes: walk.done.bytes },
  };
  const files = [{ path: RECORDS_FILE, bytes: sealed.bytes, sha256: sealed.fileSha256 }];
  const counts = {
    tenants: 1,
    buckets: walk.buckets,
    versions: walk.done.objects,
    chunks: walk.chunks,
  };
  return { part, files, counts };
}

type BackupCounts = NonNullable<BackupRecord['counts']>;

/** A bucket's settings as its record keeps them; webhook secrets opened (the file is sealed). */
function bucketRecordOf(copy: IndexStore, master: Buffer, bucket: BucketRecord) {
  const record: BucketBackupRecord = {
    type: 'bucket',
    name: bucket.name,
    createdAt: bucket.createdAt,
    versioning: bucket.versioning,
    objectLock: bucket.objectLock,
  };
  for (const name of BUCKET_SETTINGS)
    if (bucket[name] !== undefined) Object.assign(record, { [name]: bucket[name] });
  const notifications = copy.get<BucketNotificationsRecord>(
    DB.notifications,
    bucketKeyPrefix(bucket.id),
  );
  if (notifications && notifications.configs.length > 0) {
    const seal = deriveKey(master, PURPOSE_SECRET_SEAL);
    record.notifications = notifications.configs.map(({ sealedSecret, ...config }) => ({
      ...config,
      secret:
        sealedSecret.length === 0
          ? ''
          : openSecret(
              seal,
              Buffer.from(sealedSecret),
              `webhook:${bucket.tenantId}:${String(bucket.id)}:${config.id}`,
            ).toString('base64'),
    }));
  }
  return record;
}

/** Up to PAGE versions of a bucket after `after` (exclusive). */
function versionPage(copy: IndexStore, bucketId: number, after: Buffer | undefined) {
  const prefix = bucketKeyPrefix(bucketId);
  const start = after === undefined ? prefix : Buffer.concat([after, Buffer.from([0])]);
  const end = Buffer.concat([prefix, Buffer.alloc(1, 0xff)]);
  const entries = copy.range<ObjectVersionRecord>(DB.versions, { start, end, limit: PAGE });
  return [...entries].map((entry) => ({ key: Buffer.from(entry.key), value: entry.value }));
}

async function backUpBucket(
  deps: TenantJobDeps,
  walk: Walk,
  bucket: BucketRecord,
  progress: (done: TenantProgress) => Promise<void>,
): Promise<void> {
  for (let after: Buffer | undefined; ;) {
    const entries = versionPage(walk.copy, bucket.id, after);
    if (entries.length === 0) return;
    after = entries[entries.length - 1]?.key;
    for (const { value: version } of entries) {
      if (deps.isStopped()) throw Conflict('the engine is stopping');
      if (version.sseCustomer !== undefined) {
        walk.skipped += 1;
        await walk.records.add({
          type: 'skipped',
          bucket: bucket.name,
          key: version.key,
          versionId: version.versionId,
          reason: 'sse-c',
        });
        continue;
      }
      const record = versionRecordOf(bucket.name, version);
      if (version.deleteMarker !== true) {
        const found = await walk.base?.cursor.find(record);
        const linked = found?.file !== undefined && found.etag === record.etag;
        record.file = linked
          ? await linkFromBase(walk, found.file as VersionFile)
          : await backUpBytes(deps, walk, version, record);
        walk.chunks += unpackChunkRefs(Buffer.from(version.chunks)).length;
        if (linked) walk.done.linked += 1;
        walk.done.bytes += version.size;
      }
      await walk.records.add(record);
      walk.done.objects += 1;
      if (walk.done.objects % PROGRESS_EVERY === 0) await progress(walk.done);
    }
  }
}

function versionRecordOf(bucket: string, version: ObjectVersionRecord): VersionBackupRecord {
  const { chunks: _chunks, storedBytes: _stored, sseCustomer: _customer, ...fields } = version;
  return { type: 'version', bucket, ...fields };
}

async function linkFromBase(walk: Walk, file: VersionFile): Promise<VersionFile> {
  const path = `objects/${String(walk.files)}`;
  walk.files += 1;
  await link(join(walk.base?.dir ?? '', file.path), join(walk.partial, path));
  return { ...file, path };
}

/** One version's bytes into a new sealed file of the backup. */
async function backUpBytes(
  deps: TenantJobDeps,
  walk: Walk,
  version: ObjectVersionRecord,
  record: VersionBackupRecord,
): Promise<VersionFile> {
  const path = `objects/${String(walk.files)}`;
  walk.files += 1;
  const nonce = newFileNonce();
  const writer = await SealedWriter.create(join(walk.partial, path), walk.key, nonce);
  try {
    for (const ref of unpackChunkRefs(Buffer.from(version.chunks))) {
      const chunk = walk.copy.get<ChunkRecord>(
        DB.chunks,
        chunkKey(walk.tenantKeys.tenantNum, ref.id),
      );
      if (!chunk)
        throw CorruptData(
          `${record.bucket}/${record.key}: a chunk of it has no entry in the index`,
        );
      const plain = decodeChunk(walk.tenantKeys, await deps.reader.read(chunk), {
        chunkId: ref.id,
        payloadChecksum: chunk.payloadChecksum,
        plainLength: ref.plainLength,
      });
      await writer.write(plain);
    }
  } catch (error) {
    await writer.abandon().catch(() => undefined);
    throw error;
  }
  const sealed = await writer.finish();
  if (sealed.plainBytes !== version.size)
    throw CorruptData(
      `${record.bucket}/${record.key}: read ${String(sealed.plainBytes)} bytes of ` +
        String(version.size),
    );
  return { path, nonce, bytes: sealed.bytes, size: sealed.plainBytes, sha256: sealed.sha256 };
}
