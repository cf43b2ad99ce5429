// Data-plane commands: buckets, object commits and deletes, with their chunk reference counts,
// segment live-byte accounting and tenant usage, all in the command's transaction.
//
// Version rules follow S3: an Unversioned bucket keeps one version per key (the null version);
// Enabled adds a version per write and a delete marker per unversioned delete; Suspended
// writes and deletes replace the null version and keep the others. `objects` holds the current
// version of each key that is not a delete marker; `versions` holds every version.

import {
  DB,
  tenantChildKey,
  bucketKeyOfSharedId,
  bucketSharedId,
  bucketNameKey,
  objectKey,
  versionKey,
  versionRange,
  chunkKey,
  segmentKey,
  tenantKey,
  emptyUsage,
  SEQ_MAX,
  CHUNK_REF_SIZE,
  type BucketRecord,
  type BucketNameRecord,
  type ObjectVersionRecord,
  type ChunkRecord,
  type SegmentRecord,
  type UsageRecord,
  type Versioning,
  type TenantRecord,
  type BucketUsageRecord,
  type ObjectTag,
  type ServerSideEncryption,
  versionLocked,
} from '../index/schema.js';
import { checkQuota, checkQuotaIn, quotaOf } from './quota.js';
import { completeIdempotent, replayInCommit, requireClaim, type HeldKey } from './idempotency.js';
import { nextCounter, type EngineContext } from './context.js';
import { noteNewChunks } from './reencryption.js';
import type { IndexStore, EncodedRecord } from '../index/store.js';
import { readActiveTenant, requireActiveTenant } from './control.js';
import {
  Conflict,
  NotFound,
  BucketNotEmpty,
  PreconditionFailed,
  Forbidden,
  ChunkGone,
  BadRequest,
  MethodNotAllowed,
  type LightwellError,
} from '../../util/errors.js';
import { validateBucketName } from '../../security/names.js';
import { recordObjectEvent } from './notifications.js';
import { abortBucketUploads, MULTIPART_EXPIRE_PARTS_PER_BATCH } from './multipart.js';
import { checkSseCustomer, newVersionSse } from './encryption.js';
import { newVersionLock, refuseLockedDelete, type NewVersionLock } from './object-lock.js';
import { lifecycleAfterRemove, lifecycleAfterWrite } from './lifecycle-index.js';

export function createBucket(
  context: EngineContext,
  args: { tenantId: string; name: string; versioning?: Versioning; objectLock?: boolean },
): BucketRecord {
  const tenant = requireActiveTenant(context, args.tenantId);
  validateBucketName(args.name);
  const key = tenantChildKey(tenant.id, args.name);
  if (context.store.has(DB.buckets, key))
    throw Conflict(`bucket ${args.name} already exists`, { bucketOwner: 'caller' });
  // Bucket names are global: another tenant's name answers the same 409 without naming it.
  if (context.store.has(DB.bucketNames, bucketNameKey(args.name)))
    throw Conflict(`bucket ${args.name} already exists`, { bucketOwner: 'other' });
  const objectLock = args.objectLock === true;
  const bucket: BucketRecord = {
    id: nextCounter(context, 'nextBucketId'),
    tenantId: tenant.id,
    name: args.name,
    createdAt: context.now(),
    versioning: objectLock || args.versioning === 'Enabled' ? 'Enabled' : 'Unversioned',
    objectLock,
  };
  context.store.put(DB.buckets, key, bucket);
  context.store.put(DB.bucketNames, bucketNameKey(args.name), {
    tenantId: tenant.id,
  });
  return bucket;
}

/**
 * Deletes an empty bucket. Uploads in progress refuse it, unless `abortUploads` (S3's
 * DeleteBucket, as AWS and RGW do): they are then aborted in this transaction, at most
 * MULTIPART_EXPIRE_PARTS_PER_BATCH parts released here; any beyond are the background pass's
 * (the uploads of a bucket that is gone), so the transaction stays bounded.
 */
export function deleteBucket(
  context: EngineContext,
  args: { tenantId: string; name: string; abortUploads?: boolean },
): void {
  const bucket = requireBucket(context, args.tenantId, args.name);
  const start = objectKey(bucket.id, '');
  const end = Buffer.concat([start.subarray(0, 4), Buffer.from([0xff])]);
  for (const _entry of context.store.range(DB.versions, { start, end, limit: 1 })) {
    throw BucketNotEmpty(`bucket ${args.name} is not empty`);
  }
  if (args.abortUploads === true) {
    const tenant = requireActiveTenant(context, args.tenantId);
    abortBucketUploads(context, { tenant, bucket, partsMax: MULTIPART_EXPIRE_PARTS_PER_BATCH });
  } else {
    for (const _entry of context.store.range(DB.multipart, { start, end, limit: 1 })) {
      throw BucketNotEmpty(
        `bucket ${args.name} has multipart uploads in progress; complete or abort them first`,
      );
    }
  }
  context.store.remove(DB.buckets, tenantChildKey(args.tenantId, args.name));
  removeBucketName(context, args.tenantId, args.name);
  const usage = loadUsage(context, args.tenantId);
  if (usage.buckets?.[args.name]) {
    const { [args.name]: _deleted, ...others } = usage.buckets;
    usage.buckets = others;
    saveUsage(context, usage);
  }
}

/** Frees a bucket's global name, when this tenant holds it. */
export function removeBucketName(context: EngineContext, tenantId: string, name: string): void {
  const key = bucketNameKey(name);
  const holder = context.store.get<BucketNameRecord>(DB.bucketNames, key);
  if (holder?.tenantId === tenantId) context.store.remove(DB.bucketNames, key);
}

/**
 * Checks the global bucket-name index against the buckets at start: fills in the names of
 * buckets made before the index existed, and refuses to start (naming them) when two tenants
 * hold one name, which only a data directory from before the rule can have.
 */
export function checkBucketNames(context: EngineContext): number {
  const holders = new Map<string, string[]>();
  for (const entry of context.store.range<BucketRecord>(DB.buckets, {})) {
    const list = holders.get(entry.value.name) ?? [];
    list.push(entry.value.tenantId);
    holders.set(entry.value.name, list);
  }
  const shared = [...holders].filter(([, tenants]) => tenants.length > 1);
  if (shared.length > 0) {
    const named = shared
      .slice(0, 20)
      .map(([name, tenants]) => `${name} (tenants ${tenants.join(', ')})`)
      .join('; ');
    throw Conflict(
      `bucket names are global, but more than one tenant holds ${named}: delete or empty ` +
        'and remove all but one of each before starting this release',
      { sharedNames: shared.length },
    );
  }
  let added = 0;
  for (const [name, [tenantId]] of holders) {
    const key = bucketNameKey(name);
    const holder = context.store.get<BucketNameRecord>(DB.bucketNames, key);
    if (holder?.tenantId === tenantId) continue;
    context.store.put(DB.bucketNames, key, { tenantId: tenantId as string });
    added += 1;
  }
  return added;
}

export function requireBucket(
  context: EngineContext,
  tenantId: string,
  name: string,
): BucketRecord {
  const bucket = context.store.get<BucketRecord>(DB.buckets, tenantChildKey(tenantId, name));
  if (!bucket) throw NotFound(`bucket ${name} not found`);
  return bucket;
}

/**
 * `requireBucket` for a command that only reads the bucket: the decoded-record cache's frozen
 * copy (`getShared`), which spares a decode on every write of an object.
 */
export function readBucket(
  context: EngineContext,
  tenantId: string,
  name: string,
): Readonly<BucketRecord> {
  const bucket = context.store.getSharedById<BucketRecord>(
    DB.buckets,
    bucketSharedId(tenantId, name),
    bucketKeyOfSharedId,
  );
  if (!bucket) throw NotFound(`bucket ${name} not found`);
  return bucket;
}

/** A chunk of a manifest; `location` is present when this request wrote the chunk's record. */
export interface ManifestChunk {
  id: Buffer;
  plainLength: number;
  location?: { segmentId: number; offset: number; length: number; payloadChecksum: number };
}

export interface PutObjectArgs {
  tenantId: string;
  bucket: string;
  key: string;
  size: number;
  etag: string;
  contentType: string;
  metadata: Record<string, string>;
  /** S3's representation headers (ObjectVersionRecord.headers). */
  headers?: Record<string, string>;
  checksums: Record<string, string>;
  compressed: boolean;
  chunks: ManifestChunk[];
  ifMatch?: string;
  ifNoneMatch?: string;
  ifUnmodifiedSince?: number;
  /** Completes the idempotency record begun by `beginIdempotent`. */
  idempotency?: HeldKey;
  /**
   * The id of the bucket the upload began in: a bucket deleted and made again under the same
   * name while the body streamed in is another bucket, with other settings, and the object is
   * not put there.
   */
  bucketId?: number;
  /** The new version's lock (object-lock.ts), tags and S3 encryption (encryption.ts). */
  lock?: NewVersionLock;
  tags?: ObjectTag[];
  sse?: ServerSideEncryption;
  /** SSE-C: the salt and verifier of the customer key the chunks' bytes are under. */
  sseCustomer?: unknown;
  /** A completed upload's part sizes, kept when a cluster member copies the version. */
  partSizes?: number[];
}

export function putObject(context: EngineContext, args: PutObjectArgs): ObjectVersionRecord {
  const tenant = readActiveTenant(context, args.tenantId);
  const bucket = readBucket(context, tenant.id, args.bucket);
  if (args.bucketId !== undefined && bucket.id !== args.bucketId)
    throw NotFound(`bucket ${args.bucket} was deleted while the object was uploaded`);
  const current = context.store.get<ObjectVersionRecord>(
    DB.objects,
    objectKey(bucket.id, args.key),
  );
  // A replica's apply of a version it holds already (a repair copied it in between the apply's
  // check and this commit): nothing, else its chunk references and usage would count twice.
  const replicaSeq = context.reserved?.nextSeq;
  if (replicaSeq !== undefined) {
    const copied = context.store.get<ObjectVersionRecord>(
      DB.versions,
      versionKey(bucket.id, args.key, replicaSeq),
    );
    if (copied !== undefined) return copied;
  }
  const held = args.idempotency
    ? { tenantId: tenant.id, bucket: bucket.name, ...args.idempotency }
    : undefined;
  // A key decided here replays before the conditions, as one begun before the body would.
  const first = held?.inCommit ? replayInCommit(context, held) : undefined;
  if (first) return first;
  checkWriteConditions(current, args);
  const locked = {
    ...newVersionLock(context, bucket, args.lock),
    // A version under a customer key reports SSE-C, never the bucket's default encryption.
    ...(args.sseCustomer === undefined
      ? newVersionSse(bucket, args.sse)
      : { sseCustomer: checkSseCustomer(args.sseCustomer) }),
  };
  if (held && !held.inCommit) requireClaim(context, held);
  const existingNull = replacedNullIn(context.store, bucket, args.key, current);
  checkQuota(context, tenant.id, args.size - (existingNull?.size ?? 0), current ? 0 : 1);
  // Loaded after the checks: a command that fails before it fails alone in its batch.
  const usage = loadUsage(context, tenant.id);
  const storedBytes = addChunkRefs(context, tenant.num, args.chunks, usage);
  const { seq, versionId } = nextVersionOf(context, bucket);
  const version: ObjectVersionRecord = {
    key: args.key,
    versionId,
    seq,
    lastModified: context.now(),
    size: args.size,
    etag: args.etag,
    contentType: args.contentType,
    metadata: args.metadata,
    checksums: args.checksums,
    chunks: packChunkRefs(args.chunks),
    storedBytes,
    compressed: args.compressed,
  };
  if (args.headers !== undefined) version.headers = args.headers;
  if (args.tags !== undefined && args.tags.length > 0) version.tags = args.tags;
  if (args.partSizes !== undefined) version.partSizes = args.partSizes;
  Object.assign(version, locked);
  const encoded = writeVersion(context, {
    tenant,
    bucket,
    version,
    usage,
    existingNull: existingNull ?? null,
  });
  saveUsage(context, usage);
  recordObjectEvent(context, bucket, 'object-created', version);
  if (args.idempotency)
    completeIdempotent(
      context,
      { tenantId: tenant.id, bucket: bucket.name, ...args.idempotency, result: version },
      encoded,
    );
  return version;
}

/**
 * The null version that a write of `key` replaces (S3's rules): undefined in an Enabled bucket,
 * where nothing is replaced; in an Unversioned one the current object (such a bucket holds only
 * null versions); in a Suspended one the key's null version; null when there is none. Works on a
 * read-only store too.
 */
export function replacedNullIn(
  store: IndexStore,
  bucket: BucketRecord,
  key: string,
  current: ObjectVersionRecord | undefined,
): ObjectVersionRecord | null | undefined {
  if (bucket.versioning === 'Enabled') return undefined;
  if (bucket.versioning === 'Unversioned') return current ?? null;
  return findVersionIn(store, bucket.id, key, 'null') ?? null;
}

/**
 * `putObject`'s quota check, for the gateway to run on its read-only store before it reads a
 * body of `size` bytes: the null version the write replaces frees its bytes, and only a new key
 * adds an object. Without a quota it reads nothing more. The engine's check stays the one that
 * counts.
 */
export function checkPutQuotaIn(
  store: IndexStore,
  args: { tenantId: string; bucket: BucketRecord; key: string; size: number },
): void {
  if (!quotaOf(store, args.tenantId)) return;
  const current = store.get<ObjectVersionRecord>(DB.objects, objectKey(args.bucket.id, args.key));
  const replaced = replacedNullIn(store, args.bucket, args.key, current);
  checkQuotaIn(store, args.tenantId, args.size - (replaced?.size ?? 0), current ? 0 : 1);
}

/**
 * The preconditions of a write, as the request's headers gave them; `ifUnmodifiedSince` is the
 * HTTP-date in milliseconds (whole seconds).
 */
export interface WriteConditions {
  readonly ifMatch?: string | undefined;
  readonly ifNoneMatch?: string | undefined;
  readonly ifUnmodifiedSince?: number | undefined;
}

/**
 * Refuses the write (412) unless its preconditions hold against the current object, in the
 * order of RFC 9110 §13.2.2: If-Match, else If-Unmodified-Since, then If-None-Match.
 * If-Modified-Since is for reads only, and If-Unmodified-Since is ignored when nothing is
 * there to have a date (§13.1.4).
 */
export function checkWriteConditions(
  current: ObjectVersionRecord | undefined,
  args: WriteConditions,
): void {
  if (args.ifMatch !== undefined) {
    // If-Match compares strongly (RFC 9110 §13.1.1): a weak tag never lets a write through.
    if (
      !current ||
      !(args.ifMatch === '*' || etagListMatches(args.ifMatch, current.etag, 'strong'))
    ) {
      throw PreconditionFailed('If-Match: the current object does not match');
    }
  } else if (args.ifUnmodifiedSince !== undefined && current) {
    if (Math.floor(current.lastModified / 1000) * 1000 > args.ifUnmodifiedSince)
      throw PreconditionFailed('If-Unmodified-Since: the object was modified since');
  }
  if (args.ifNoneMatch !== undefined) {
    if (current && (args.ifNoneMatch === '*' || etagListMatches(args.ifNoneMatch, current.etag))) {
      throw PreconditionFailed('If-None-Match: the object exists');
    }
  }
}

/**
 * A list of entity tags holds `etag`. Weak comparison (RFC 9110 §8.8.3.2) ignores a `W/`
 * prefix; strong comparison, which If-Match of a read uses, never matches a weak tag.
 */
export function etagListMatches(
  header: string,
  etag: string,
  comparison: 'weak' | 'strong' = 'weak',
): boolean {
  return header.split(',').some((part) => {
    const tag = part.trim();
    return (comparison === 'weak' ? tag.replace(/^W\//, '') : tag) === etag;
  });
}

/**
 * S3's 405 for a delete marker named by its version id where a marker has nothing to give: a
 * GET or HEAD of it (`allow` DELETE: the version can be deleted), or its tags, retention or
 * legal hold (`allow` empty: a marker has none). The headers say it is a delete marker.
 */
export function deleteMarkerNamed(
  marker: ObjectVersionRecord,
  allow: '' | 'DELETE',
): LightwellError {
  return MethodNotAllowed(`version ${marker.versionId} of ${marker.key} is a delete marker`, {
    allow,
    deleteMarkerVersionId: marker.versionId,
  });
}

export function versionIdOf(seq: number): string {
  return seq.toString(16).padStart(16, '0');
}

/**
 * The sequence number and version id of a new version (an object, a copy, a completed upload,
 * a delete marker): the next sequence number, and its id in a versioned bucket or `null` in an
 * unversioned or suspended one. Every new version record is numbered here.
 */
export function nextVersionOf(
  context: EngineContext,
  bucket: BucketRecord,
): { seq: number; versionId: string } {
  const seq = nextCounter(context, 'nextSeq');
  return { seq, versionId: bucket.versioning === 'Enabled' ? versionIdOf(seq) : 'null' };
}

/**
 * The sequence number a version id was made from; undefined when the text is not one this
 * service could have issued (16 lower-case hex digits of at most SEQ_MAX: a larger one would
 * not fit the descending key of the versions database).
 */
export function seqOfVersionId(versionId: string): number | undefined {
  if (!/^[0-9a-f]{16}$/.test(versionId)) return undefined;
  const seq = Number.parseInt(versionId, 16);
  return seq <= SEQ_MAX ? seq : undefined;
}

/** Inserts a version, replacing the null version where the bucket's state says so. */
export function writeVersion(
  context: EngineContext,
  args: {
    tenant: TenantRecord;
    bucket: BucketRecord;
    version: ObjectVersionRecord;
    usage: UsageRecord;
    /** The null version this write replaces, when the caller already knows it (null: none). */
    existingNull?: ObjectVersionRecord | null;
  },
): EncodedRecord {
  const { tenant, bucket, version, usage } = args;
  if (version.versionId === 'null') {
    const existing =
      args.existingNull === undefined
        ? findNullVersion(context, bucket.id, version.key)
        : (args.existingNull ?? undefined);
    if (existing && versionLocked(existing, context.now()))
      throw Forbidden(`${version.key} is under retention or legal hold`);
    if (existing) removeVersion(context, { tenant, bucket, version: existing, usage });
  }
  const encoded = context.store.encode(version);
  context.store.put(DB.versions, versionKey(bucket.id, version.key, version.seq), encoded);
  if (version.deleteMarker) {
    usage.deleteMarkers += 1;
    bucketCounters(usage, bucket.name).deleteMarkers += 1;
  } else {
    usage.versions += 1;
    usage.logicalBytes += version.size;
    const counters = bucketCounters(usage, bucket.name);
    counters.versions += 1;
    counters.logicalBytes += version.size;
  }
  // A new version has the highest sequence number: it is the key's current version.
  setCurrent(context, bucket, version.key, version, usage, encoded);
  lifecycleAfterWrite(context, bucket, version);
  return encoded;
}

/** Makes `objects` hold `latest` for the key, or nothing when there is none or it is a marker. */
function setCurrent(
  context: EngineContext,
  bucket: BucketRecord,
  key: string,
  latest: ObjectVersionRecord | undefined,
  usage: UsageRecord,
  encodedLatest?: EncodedRecord,
): void {
  const currentKey = objectKey(bucket.id, key);
  const hadCurrent = context.store.has(DB.objects, currentKey);
  if (latest && !latest.deleteMarker) {
    context.store.put(DB.objects, currentKey, encodedLatest ?? latest);
    if (!hadCurrent) {
      usage.objects += 1;
      bucketCounters(usage, bucket.name).objects += 1;
    }
  } else if (hadCurrent) {
    context.store.remove(DB.objects, currentKey);
    usage.objects -= 1;
    bucketCounters(usage, bucket.name).objects -= 1;
  }
}

/** The per-bucket part of a tenant's usage, kept in the same transactions as the totals. */
function bucketCounters(usage: UsageRecord, bucketName: string): BucketUsageRecord {
  usage.buckets ??= {};
  usage.buckets[bucketName] ??= { logicalBytes: 0, objects: 0, versions: 0, deleteMarkers: 0 };
  return usage.buckets[bucketName];
}

export function findNullVersion(
  context: EngineContext,
  bucketId: number,
  key: string,
): ObjectVersionRecord | undefined {
  for (const { value } of context.store.range<ObjectVersionRecord>(
    DB.versions,
    versionRange(bucketId, key),
  )) {
    if (value.versionId === 'null') return value;
  }
  return undefined;
}

/** Makes `objects` hold the newest version of the key (after a version was removed). */
export function refreshCurrent(
  context: EngineContext,
  bucket: BucketRecord,
  key: string,
  usage: UsageRecord,
): void {
  let latest: ObjectVersionRecord | undefined;
  for (const { value } of context.store.range<ObjectVersionRecord>(DB.versions, {
    ...versionRange(bucket.id, key),
    limit: 1,
  })) {
    latest = value;
  }
  setCurrent(context, bucket, key, latest, usage);
}

export function removeVersion(
  context: EngineContext,
  args: {
    tenant: TenantRecord;
    bucket: BucketRecord;
    version: ObjectVersionRecord;
    usage: UsageRecord;
  },
): void {
  const { tenant, bucket, version, usage } = args;
  context.store.remove(DB.versions, versionKey(bucket.id, version.key, version.seq));
  if (version.deleteMarker) {
    usage.deleteMarkers -= 1;
    bucketCounters(usage, bucket.name).deleteMarkers -= 1;
  } else {
    usage.versions -= 1;
    usage.logicalBytes -= version.size;
    const counters = bucketCounters(usage, bucket.name);
    counters.versions -= 1;
    counters.logicalBytes -= version.size;
    releaseChunkRefs(context, tenant.num, version.chunks, usage);
  }
  lifecycleAfterRemove(context, bucket, version);
}

export interface DeleteObjectArgs {
  tenantId: string;
  bucket: string;
  key: string;
  versionId?: string;
  /** S3's x-amz-bypass-governance-retention, allowed by the service (object-lock.ts). */
  bypassGovernance?: boolean;
  /** The preconditions (WriteConditions) test the object, or the version with versionId. */
  ifMatch?: string;
  ifNoneMatch?: string;
  ifUnmodifiedSince?: number;
}

export interface DeleteObjectResult {
  key: string;
  versionId?: string;
  deleteMarker?: boolean;
}

export function deleteObject(context: EngineContext, args: DeleteObjectArgs): DeleteObjectResult {
  const tenant = requireActiveTenant(context, args.tenantId);
  const bucket = requireBucket(context, tenant.id, args.bucket);
  // The preconditions are checked after what would refuse the delete anyway (RFC 9110
  // §13.2.1): a version that does not exist is 404, a locked one 403, whatever the condition.
  const preconditions = (target: ObjectVersionRecord | undefined): void =>
    checkWriteConditions(target?.deleteMarker ? undefined : target, args);
  // The usage is loaded after each branch's checks: a command that fails before it fails alone
  // in its batch (a batch delete often names versions that are gone).
  let usage: UsageRecord;
  let result: DeleteObjectResult;
  if (args.versionId !== undefined) {
    const version = findVersion(context, bucket.id, args.key, args.versionId);
    if (!version) throw NotFound(`version ${args.versionId} of ${args.key} not found`);
    refuseLockedDelete(version, context.now(), args.bypassGovernance === true);
    preconditions(version);
    usage = loadUsage(context, tenant.id);
    removeVersion(context, { tenant, bucket, version, usage });
    refreshCurrent(context, bucket, args.key, usage);
    result = { key: args.key, versionId: version.versionId };
    if (version.deleteMarker) result.deleteMarker = true;
  } else if (bucket.versioning === 'Unversioned') {
    const version = findNullVersion(context, bucket.id, args.key);
    if (version && versionLocked(version, context.now()))
      throw Forbidden(`${args.key} is under retention or legal hold`);
    preconditions(version);
    usage = loadUsage(context, tenant.id);
    if (version) {
      removeVersion(context, { tenant, bucket, version, usage });
      refreshCurrent(context, bucket, args.key, usage);
      recordObjectEvent(context, bucket, 'object-removed', version);
    }
    result = { key: args.key };
  } else {
    preconditions(
      context.store.get<ObjectVersionRecord>(DB.objects, objectKey(bucket.id, args.key)),
    );
    usage = loadUsage(context, tenant.id);
    const { seq, versionId } = nextVersionOf(context, bucket);
    const marker: ObjectVersionRecord = {
      key: args.key,
      versionId,
      seq,
      lastModified: context.now(),
      deleteMarker: true,
      size: 0,
      etag: '',
      contentType: '',
      metadata: {},
      checksums: {},
      chunks: Buffer.alloc(0),
      storedBytes: 0,
      compressed: false,
    };
    writeVersion(context, { tenant, bucket, version: marker, usage });
    result = { key: args.key, versionId: marker.versionId, deleteMarker: true };
  }
  saveUsage(context, usage);
  if (result.versionId !== undefined)
    recordObjectEvent(context, bucket, 'object-removed', {
      key: args.key,
      versionId: result.versionId,
    });
  return result;
}

export function findVersion(
  context: EngineContext,
  bucketId: number,
  key: string,
  versionId: string,
): ObjectVersionRecord | undefined {
  return findVersionIn(context.store, bucketId, key, versionId);
}

/** Finds one version by id; usable on a read-only store. */
export function findVersionIn(
  store: IndexStore,
  bucketId: number,
  key: string,
  versionId: string,
): ObjectVersionRecord | undefined {
  if (versionId === 'null') {
    for (const { value } of store.range<ObjectVersionRecord>(
      DB.versions,
      versionRange(bucketId, key),
    )) {
      if (value.versionId === 'null') return value;
    }
    return undefined;
  }
  const seq = seqOfVersionId(versionId);
  if (seq === undefined) throw BadRequest(`malformed versionId ${JSON.stringify(versionId)}`);
  return store.get<ObjectVersionRecord>(DB.versions, versionKey(bucketId, key, seq));
}

// ---- chunk references ----------------------------------------------------------------------

export function packChunkRefs(chunks: readonly ManifestChunk[]): Buffer {
  const packed = Buffer.alloc(chunks.length * CHUNK_REF_SIZE);
  chunks.forEach((chunk, index) => {
    if (chunk.id.length !== 32) throw BadRequest('chunk ids are 32 bytes');
    chunk.id.copy(packed, index * CHUNK_REF_SIZE);
    packed.writeUInt32LE(chunk.plainLength, index * CHUNK_REF_SIZE + 32);
  });
  return packed;
}

export function unpackChunkRefs(packed: Buffer): Array<{ id: Buffer; plainLength: number }> {
  const refs: Array<{ id: Buffer; plainLength: number }> = [];
  for (let offset = 0; offset + CHUNK_REF_SIZE <= packed.length; offset += CHUNK_REF_SIZE) {
    refs.push({
      id: packed.subarray(offset, offset + 32),
      plainLength: packed.readUInt32LE(offset + 32),
    });
  }
  return refs;
}

/** Adds one reference per manifest entry; returns the bytes newly made live. */
export function addChunkRefs(
  context: EngineContext,
  tenantNum: number,
  chunks: readonly ManifestChunk[],
  usage: UsageRecord,
): number {
  let stored = 0;
  const created: Buffer[] = [];
  for (const chunk of chunks) {
    const key = chunkKey(tenantNum, chunk.id);
    const record = context.store.get<ChunkRecord>(DB.chunks, key);
    if (record) {
      if (record.refs === 0) {
        delete record.deadSince;
        adjustSegmentLive(context, record.segmentId, record.length);
        usage.physicalBytes += record.length;
        stored += record.length;
      }
      record.refs += 1;
      context.store.put(DB.chunks, key, record);
      continue;
    }
    if (!chunk.location)
      throw ChunkGone('a deduplicated chunk was reclaimed before the commit; retry the upload');
    // Named field by field (in the stored order): a spread of the decoded frame's object built a
    // new hidden class on every call, and would carry any stray field of it into the index.
    const { segmentId, offset, length, payloadChecksum } = chunk.location;
    const entry: ChunkRecord = {
      segmentId,
      offset,
      length,
      payloadChecksum,
      plainLength: chunk.plainLength,
      refs: 1,
    };
    context.store.put(DB.chunks, key, entry);
    adjustSegmentLive(context, entry.segmentId, entry.length);
    usage.physicalBytes += entry.length;
    stored += entry.length;
    created.push(chunk.id);
  }
  // A re-encryption in progress looks again at chunks an upload under the old key may add.
  noteNewChunks(context, tenantNum, created);
  return stored;
}

export function releaseChunkRefs(
  context: EngineContext,
  tenantNum: number,
  packed: Buffer,
  usage: UsageRecord,
): void {
  for (const ref of unpackChunkRefs(packed)) {
    const key = chunkKey(tenantNum, ref.id);
    const record = context.store.get<ChunkRecord>(DB.chunks, key);
    if (!record || record.refs === 0) continue;
    record.refs -= 1;
    if (record.refs === 0) {
      record.deadSince = context.now();
      adjustSegmentLive(context, record.segmentId, -record.length);
      usage.physicalBytes -= record.length;
    }
    context.store.put(DB.chunks, key, record);
  }
}

function adjustSegmentLive(context: EngineContext, segmentId: number, delta: number): void {
  const key = segmentKey(segmentId);
  const segment = context.store.get<SegmentRecord>(DB.segments, key);
  // A segment being deleted (its file may be gone already) takes no new reference.
  if (!segment || (segment.state === 'deleted' && delta > 0))
    throw ChunkGone(`segment ${segmentId} was reclaimed before the commit; retry the upload`);
  segment.liveBytes += delta;
  context.store.put(DB.segments, key, segment);
}

// ---- usage ---------------------------------------------------------------------------------

export function loadUsage(context: EngineContext, tenantId: string): UsageRecord {
  return context.store.get<UsageRecord>(DB.usage, tenantKey(tenantId)) ?? emptyUsage(tenantId);
}

export function saveUsage(context: EngineContext, usage: UsageRecord): void {
  context.store.put(DB.usage, tenantKey(usage.tenantId), usage);
}
