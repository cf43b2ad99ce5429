// Multipart uploads: create, upload part, complete, abort, and the expiry of abandoned uploads.
//
// Parts travel the same pipeline as object PUTs (chunked, deduplicated, encrypted, fsynced by
// the pool); a part commit stores only its chunk manifest here and takes one reference per
// chunk, exactly as an object version does. Complete builds the object from the parts' chunk
// references without reading or copying a byte: the listed parts' references move to the new
// version (no chunk entry changes), the references of parts not listed are released.
//
// Invariants:
// - Every chunk a part names holds one reference for it until the part is completed into a
//   version (the reference moves), replaced by a new upload of its number, aborted or expired
//   (released). So usage.physicalBytes counts parts, and abandoned parts never leak: the
//   engine's background pass aborts uploads older than `multipart.expiry` and uploads whose
//   bucket or tenant is gone.
// - A part counts against the tenant's maxBytes from its upload on: its size is added to
//   usage.partBytes (and the part marked `quotaCounted`) in the transaction that stores it,
//   after the same quota check as a PUT's, less the part it replaces. Complete moves the listed
//   parts' bytes from partBytes into the version's logicalBytes; abort, expiry, a tenant purge
//   and complete (for parts not listed) take released parts' bytes out. Parts are not objects:
//   only complete can add one.
// - Complete checks the list before any write: 1..MULTIPART_PARTS_MAX parts in strictly
//   ascending order, each uploaded with the listed ETag, every part but the last at least
//   MULTIPART_PART_BYTES_MIN; then the write conditions, the quota and the retention gate of
//   `writeVersion`, as a PUT of the whole object would. An entry may carry the rest of its
//   listParts entry (so a listParts answer can be sent back); what it carries is checked: `size`
//   must be the part's (else `bad_request`), each of `checksums` the part's digest of that
//   algorithm (else `checksum_mismatch`, as S3 refuses a part checksum that does not match).
// - A multipart object's ETag is S3's form `"<hex>-<parts>"`; its CRC checksums are the
//   whole-object CRCs, combined from the parts' CRCs (CRC32C always; CRC32 and CRC64NVME when
//   every part has them). Part SHA-256 digests stay on the parts; a SHA-256 of the whole object
//   cannot be derived from them, so none is claimed.
//
// Persists: `multipart` (upload records) and `multipart-parts` (part records).

import { parseDateTime } from '../../security/expiry.js';
import { createHash, randomBytes } from 'node:crypto';
import {
  DB,
  bucketKeyPrefix,
  objectKey,
  tenantKey,
  tenantChildKey,
  multipartUploadKey,
  multipartPartKey,
  multipartPartRange,
  UPLOAD_ID_BYTES,
  emptyUsage,
  type BucketRecord,
  type TenantRecord,
  type ObjectVersionRecord,
  type MultipartUploadRecord,
  type MultipartPartRecord,
  type UsageRecord,
  type ObjectTag,
  type ServerSideEncryption,
  type SseCustomerRecord,
} from '../index/schema.js';
import type { IndexStore } from '../index/store.js';
import type { EngineContext } from './context.js';
import { requireActiveTenant } from './control.js';
import {
  requireBucket,
  addChunkRefs,
  releaseChunkRefs,
  loadUsage,
  saveUsage,
  writeVersion,
  replacedNullIn,
  checkWriteConditions,
  nextVersionOf,
  packChunkRefs,
  type ManifestChunk,
} from './objects.js';
import { checkQuota, checkQuotaIn, quotaOf } from './quota.js';
import { recordObjectEvent } from './notifications.js';
import { newVersionLock, type NewVersionLock } from './object-lock.js';
import { checkSseCustomer, checkSseSalt, newVersionSse } from './encryption.js';
import assert from 'node:assert/strict';
import { forgetUpload, lifecycleOfUpload } from './lifecycle-index.js';
import { combineChecksum, parseChecksumAlg, type CrcAlg } from '../checksums.js';
import { validateObjectKey, validateUserMetadata } from '../../security/names.js';
import { BadRequest, ChecksumMismatch, NotFound, PayloadTooLarge } from '../../util/errors.js';

export const MULTIPART_PARTS_MAX = 10_000;
export const MULTIPART_PART_BYTES_MIN = 5 * 1024 * 1024;
export const MULTIPART_PART_BYTES_MAX = 5 * 1024 ** 3;
/** Parts released per expiry transaction. */
export const MULTIPART_EXPIRE_PARTS_PER_BATCH = 1000;
const UPLOAD_ID_PATTERN = /^[0-9a-f]{32}$/;

export function isUploadId(text: string): boolean {
  return UPLOAD_ID_PATTERN.test(text);
}

/** 6 bytes of creation time (ms) then 10 random bytes: a key's uploads list oldest first. */
function newUploadId(now: number): string {
  const id = Buffer.alloc(UPLOAD_ID_BYTES);
  id.writeUIntBE(now, 0, 6);
  randomBytes(UPLOAD_ID_BYTES - 6).copy(id, 6);
  return id.toString('hex');
}

interface UploadTarget {
  tenantId: string;
  bucket: string;
  key: string;
  uploadId: string;
}

function requireUpload(
  context: EngineContext,
  args: UploadTarget,
): { tenant: TenantRecord; bucket: BucketRecord; upload: MultipartUploadRecord } {
  const tenant = requireActiveTenant(context, args.tenantId);
  const bucket = requireBucket(context, tenant.id, args.bucket);
  if (!isUploadId(args.uploadId)) throw NotFound(`upload ${args.uploadId.slice(0, 64)} not found`);
  const upload = context.store.get<MultipartUploadRecord>(
    DB.multipart,
    multipartUploadKey(bucket.id, args.key, args.uploadId),
  );
  if (!upload) throw NotFound(`upload ${args.uploadId} of ${args.key} not found`);
  return { tenant, bucket, upload };
}

/** Finds an upload on a read-only store (the gateway checks before it reads a part's body). */
export function findUploadIn(
  store: IndexStore,
  bucketId: number,
  key: string,
  uploadId: string,
): MultipartUploadRecord | undefined {
  if (!isUploadId(uploadId)) return undefined;
  return store.get<MultipartUploadRecord>(
    DB.multipart,
    multipartUploadKey(bucketId, key, uploadId),
  );
}

export function createMultipartUpload(
  context: EngineContext,
  args: {
    tenantId: string;
    bucket: string;
    key: string;
    contentType: string;
    metadata: Record<string, string>;
    headers?: Record<string, string>;
    checksum?: { alg: string; type: 'COMPOSITE' | 'FULL_OBJECT' };
    lock?: NewVersionLock;
    tags?: ObjectTag[];
    sse?: ServerSideEncryption;
    sseCustomer?: unknown;
    /** The tenant creating the upload in another tenant's bucket (S3's Initiator). */
    initiator?: string;
  },
): MultipartUploadRecord {
  const tenant = requireActiveTenant(context, args.tenantId);
  const bucket = requireBucket(context, tenant.id, args.bucket);
  validateObjectKey(args.key);
  validateUserMetadata(args.metadata);
  // Checked now, as S3 refuses a bad lock at the create; the date is checked again at complete.
  newVersionLock(context, bucket, args.lock);
  const sse = args.sseCustomer === undefined ? newVersionSse(bucket, args.sse) : {};
  const upload: MultipartUploadRecord = {
    uploadId: context.uploadId ?? newUploadId(context.now()),
    tenantId: tenant.id,
    bucketId: bucket.id,
    bucket: bucket.name,
    key: args.key,
    initiatedAt: context.now(),
    contentType: args.contentType,
    metadata: args.metadata,
  };
  if (args.headers !== undefined && Object.keys(args.headers).length > 0)
    upload.headers = args.headers;
  if (args.initiator !== undefined && args.initiator !== tenant.id) {
    if (typeof args.initiator !== 'string' || args.initiator.length > 128)
      throw BadRequest('initiator is a tenant id');
    upload.initiator = args.initiator;
  }
  if (args.checksum !== undefined) {
    const alg = parseChecksumAlg(args.checksum.alg);
    if (alg !== args.checksum.alg || !['COMPOSITE', 'FULL_OBJECT'].includes(args.checksum.type))
      throw BadRequest('checksum is {alg: CRC32|CRC32C|CRC64NVME|SHA1|SHA256, type}');
    upload.checksum = { alg, type: args.checksum.type };
  }
  if (args.lock !== undefined) upload.lock = args.lock;
  if (args.tags !== undefined && args.tags.length > 0) upload.tags = args.tags;
  if (sse.sse) upload.sse = sse.sse;
  if (args.sseCustomer !== undefined) upload.sseCustomer = checkSseCustomer(args.sseCustomer);
  context.store.put(DB.multipart, multipartUploadKey(bucket.id, args.key, upload.uploadId), upload);
  lifecycleOfUpload(context, bucket, upload, true);
  return upload;
}

export interface UploadPartArgs extends UploadTarget {
  partNumber: number;
  size: number;
  etag: string;
  checksums: Record<string, string>;
  compressed: boolean;
  chunks: ManifestChunk[];
  /** The part's SSE-C salt: given exactly when the upload is under a customer key. */
  sseSalt?: unknown;
}

/** A part as the API shows it (without its chunk references). */
export type PartView = Omit<MultipartPartRecord, 'chunks' | 'storedBytes' | 'compressed'>;

export function partView(part: MultipartPartRecord): PartView {
  return {
    partNumber: part.partNumber,
    size: part.size,
    etag: part.etag,
    checksums: part.checksums,
    lastModified: part.lastModified,
  };
}

export function uploadPart(context: EngineContext, args: UploadPartArgs): PartView {
  const { tenant, bucket, upload } = requireUpload(context, args);
  checkPartNumber(args.partNumber);
  // A part of an SSE-C upload is under its own data key, whose salt it must keep; any other
  // part is not, and no salt may make a reader treat it as if it were.
  if ((upload.sseCustomer !== undefined) !== (args.sseSalt !== undefined))
    throw BadRequest('a part has an SSE-C salt exactly when its upload uses SSE-C');
  if (!Number.isSafeInteger(args.size) || args.size < 0 || args.size > MULTIPART_PART_BYTES_MAX)
    throw BadRequest('part size out of range');
  const key = multipartPartKey(bucket.id, args.key, args.uploadId, args.partNumber);
  const replaced = context.store.get<MultipartPartRecord>(DB.multipartParts, key);
  checkQuota(context, tenant.id, args.size - partQuotaBytes(replaced), 0);
  // Loaded after the checks: a command that fails before it fails alone in its batch.
  const usage = loadUsage(context, tenant.id);
  const storedBytes = addChunkRefs(context, tenant.num, args.chunks, usage);
  if (replaced) releasePart(context, { tenantNum: tenant.num, part: replaced, usage });
  const part: MultipartPartRecord = {
    partNumber: args.partNumber,
    size: args.size,
    etag: args.etag,
    checksums: args.checksums,
    chunks: packChunkRefs(args.chunks),
    storedBytes,
    compressed: args.compressed,
    lastModified: context.now(),
    quotaCounted: true,
  };
  if (args.sseSalt !== undefined) part.sseSalt = checkSseSalt(args.sseSalt);
  context.store.put(DB.multipartParts, key, part);
  usage.partBytes = (usage.partBytes ?? 0) + part.size;
  saveUsage(context, usage);
  return partView(part);
}

/**
 * `uploadPart`'s quota check, for the gateway to run on its read-only store before it reads a
 * part of `size` bytes. Without a quota it reads nothing more.
 */
export function checkPartQuotaIn(
  store: IndexStore,
  args: {
    tenantId: string;
    bucketId: number;
    key: string;
    uploadId: string;
    partNumber: number;
    size: number;
  },
): void {
  if (!quotaOf(store, args.tenantId)) return;
  const key = multipartPartKey(args.bucketId, args.key, args.uploadId, args.partNumber);
  const replaced = store.get<MultipartPartRecord>(DB.multipartParts, key);
  checkQuotaIn(store, args.tenantId, args.size - partQuotaBytes(replaced), 0);
}

/** The bytes a part holds in its tenant's `partBytes` (0 for parts stored before they counted). */
function partQuotaBytes(part: MultipartPartRecord | undefined): number {
  return part?.quotaCounted === true ? part.size : 0;
}

/** Releases a part's chunk references and takes its bytes out of `partBytes`. */
export function releasePart(
  context: EngineContext,
  args: { tenantNum: number; part: MultipartPartRecord; usage: UsageRecord },
): void {
  const { part, usage } = args;
  releaseChunkRefs(context, args.tenantNum, Buffer.from(part.chunks), usage);
  uncountPart(usage, part);
}

/** Takes a part's bytes out of `partBytes`: it was released or became part of a version. */
function uncountPart(usage: UsageRecord, part: MultipartPartRecord): void {
  const bytes = partQuotaBytes(part);
  if (bytes > 0) usage.partBytes = (usage.partBytes ?? 0) - bytes;
}

export function checkPartNumber(partNumber: unknown): asserts partNumber is number {
  if (
    !Number.isSafeInteger(partNumber) ||
    (partNumber as number) < 1 ||
    (partNumber as number) > MULTIPART_PARTS_MAX
  ) {
    throw BadRequest(`part numbers are integers from 1 to ${MULTIPART_PARTS_MAX}`);
  }
}

/** An entry of a complete list: a part's number and ETag, and perhaps what listParts added. */
export interface CompletePart {
  partNumber: number;
  etag: string;
  size?: number;
  checksums?: Record<string, string>;
  lastModified?: string;
}

export interface CompleteArgs extends UploadTarget {
  parts: CompletePart[];
  /** The whole object's checksum as the client computed it (S3's x-amz-checksum-* on complete),
   * which must be the one the object gets (else `checksum_mismatch`). */
  checksum?: { alg: string; value: string };
  /** The object's ETag in a transport's own form (S3's `md5(part md5s)-N`), computed from the
   * listed part ETags, which are checked here to be the uploaded parts'. */
  etag?: string;
  ifMatch?: string;
  ifNoneMatch?: string;
  ifUnmodifiedSince?: number;
}

/** An SSE-C upload's record on its completed version: the listed parts' salts, in order. */
function completedSseCustomer(
  upload: MultipartUploadRecord,
  parts: readonly MultipartPartRecord[],
): SseCustomerRecord {
  const customer = upload.sseCustomer as SseCustomerRecord;
  const salts = parts.map((part) => {
    assert(part.sseSalt !== undefined, 'every part of an SSE-C upload has its salt');
    return Buffer.from(part.sseSalt);
  });
  return { ...customer, partSalts: Buffer.concat(salts) };
}

/** The parts' checksums of the upload's algorithm, when the upload has one and every part. */
function partChecksumsOf(
  upload: MultipartUploadRecord,
  parts: readonly MultipartPartRecord[],
): Pick<ObjectVersionRecord, 'partChecksums'> {
  const alg = upload.checksum?.alg;
  if (alg === undefined) return {};
  const values: string[] = [];
  for (const part of parts) {
    const value = part.checksums[alg];
    if (value === undefined) return {};
    values.push(value);
  }
  return { partChecksums: { alg, values } };
}

export function completeMultipartUpload(
  context: EngineContext,
  args: CompleteArgs,
): ObjectVersionRecord {
  const { tenant, bucket, upload } = requireUpload(context, args);
  const etag: unknown = args.etag;
  if (etag !== undefined && (typeof etag !== 'string' || !/^"[0-9a-f]{32}-\d{1,5}"$/.test(etag)))
    throw BadRequest('a multipart ETag is "<32 hex digits>-<part count>"');
  const stored = new Map<number, { key: Buffer; part: MultipartPartRecord }>();
  for (const { key, value } of context.store.range<MultipartPartRecord>(
    DB.multipartParts,
    multipartPartRange(bucket.id, args.key, args.uploadId),
  )) {
    stored.set(value.partNumber, { key: Buffer.from(key), part: value });
  }
  const parts = checkCompleteList(args.parts, stored);
  const size = parts.reduce((sum, part) => sum + part.size, 0);
  const objectBytesMax = context.settings.bytes('limits.object_bytes_max');
  if (size > objectBytesMax)
    throw PayloadTooLarge(`objects are limited to ${objectBytesMax} bytes`);
  const current = context.store.get<ObjectVersionRecord>(
    DB.objects,
    objectKey(bucket.id, args.key),
  );
  checkWriteConditions(current, args);
  const locked = newVersionLock(context, bucket, upload.lock);
  const replacedBytes = replacedNullIn(context.store, bucket, args.key, current)?.size ?? 0;
  // The upload's parts already count (partBytes) and leave partBytes here, listed or not.
  let countedBytes = 0;
  for (const { part } of stored.values()) countedBytes += partQuotaBytes(part);
  checkQuota(context, tenant.id, size - replacedBytes - countedBytes, current ? 0 : 1);
  const usage = loadUsage(context, tenant.id);
  const { seq, versionId } = nextVersionOf(context, bucket);
  const version: ObjectVersionRecord = {
    key: args.key,
    versionId,
    seq,
    lastModified: context.now(),
    size,
    etag: args.etag ?? multipartEtag(parts),
    contentType: upload.contentType,
    metadata: upload.metadata,
    ...(upload.headers ? { headers: upload.headers } : {}),
    checksums: { ...combinedChecksums(parts), ...compositeChecksums(upload, parts) },
    // The listed parts' references become the version's: no chunk entry changes.
    chunks: Buffer.concat(parts.map((part) => Buffer.from(part.chunks))),
    storedBytes: parts.reduce((sum, part) => sum + part.storedBytes, 0),
    compressed: parts.some((part) => part.compressed),
    partSizes: parts.map((part) => part.size),
    ...partChecksumsOf(upload, parts),
    ...(upload.tags ? { tags: upload.tags } : {}),
    ...(upload.sse ? { sse: upload.sse } : {}),
    ...(upload.sseCustomer ? { sseCustomer: completedSseCustomer(upload, parts) } : {}),
    ...locked,
  };
  if (args.checksum !== undefined && version.checksums[args.checksum.alg] !== args.checksum.value)
    throw ChecksumMismatch(`the object's ${args.checksum.alg} checksum is not the one given`);
  writeVersion(context, { tenant, bucket, version, usage });
  const used = new Set(parts.map((part) => part.partNumber));
  for (const [partNumber, entry] of stored) {
    if (used.has(partNumber)) uncountPart(usage, entry.part);
    else releasePart(context, { tenantNum: tenant.num, part: entry.part, usage });
    context.store.remove(DB.multipartParts, entry.key);
  }
  context.store.remove(DB.multipart, multipartUploadKey(bucket.id, args.key, args.uploadId));
  lifecycleOfUpload(
    context,
    bucket,
    { key: args.key, uploadId: args.uploadId, initiatedAt: 0 },
    false,
  );
  saveUsage(context, usage);
  recordObjectEvent(context, bucket, 'object-created', version);
  return version;
}

function normalEtag(etag: string): string {
  return etag
    .trim()
    .replace(/^W\//, '')
    .replace(/^"(.*)"$/, '$1');
}

function checkCompleteList(
  list: unknown,
  stored: ReadonlyMap<number, { part: MultipartPartRecord }>,
): MultipartPartRecord[] {
  if (!Array.isArray(list) || list.length === 0)
    throw BadRequest('parts must list at least one {partNumber, etag}');
  if (list.length > MULTIPART_PARTS_MAX)
    throw BadRequest(`an upload has at most ${MULTIPART_PARTS_MAX} parts`);
  // The list's own shape first: a repeated or unordered part number is the mistake to name,
  // not the size of a part that would be fine in a well-formed list.
  let previous = 0;
  const entries = list.map((entry: unknown, index) => {
    const checked = completePartOf(entry, index);
    if (checked.partNumber <= previous)
      throw BadRequest('parts must be listed in strictly ascending partNumber order', {
        reason: 'part_order',
      });
    previous = checked.partNumber;
    return checked;
  });
  return entries.map((entry, index) => {
    const { partNumber } = entry;
    const part = stored.get(partNumber)?.part;
    if (!part) throw BadRequest(`part ${partNumber} was not uploaded`, { reason: 'part_missing' });
    if (normalEtag(part.etag) !== normalEtag(entry.etag))
      throw BadRequest(`the etag of part ${partNumber} does not match the uploaded part`, {
        reason: 'part_missing',
      });
    checkCompletePartAgainst(entry, part);
    if (index < entries.length - 1 && part.size < MULTIPART_PART_BYTES_MIN) {
      throw BadRequest(
        `part ${partNumber} is ${part.size} bytes; every part but the last needs at least ${MULTIPART_PART_BYTES_MIN}`,
        { reason: 'part_too_small' },
      );
    }
    return part;
  });
}

/** The shape of entry `index` of a complete list: types only, before any part is looked up. */
function completePartOf(entry: unknown, index: number): CompletePart {
  const fields = (typeof entry === 'object' && entry !== null ? entry : {}) as Record<
    string,
    unknown
  >;
  const { partNumber, etag, size, checksums, lastModified } = fields;
  checkPartNumber(partNumber);
  if (typeof etag !== 'string') throw BadRequest(`parts[${index}].etag must be a string`);
  const checked: CompletePart = { partNumber, etag };
  if (size !== undefined) {
    if (!Number.isSafeInteger(size) || (size as number) < 0)
      throw BadRequest(`parts[${index}].size must be a whole number of bytes`);
    checked.size = size as number;
  }
  if (checksums !== undefined) {
    const digests = typeof checksums === 'object' && checksums !== null ? checksums : [];
    if (Array.isArray(digests) || !Object.values(digests).every((v) => typeof v === 'string'))
      throw BadRequest(`parts[${index}].checksums must map algorithms to base64 digests`);
    for (const alg of Object.keys(digests)) {
      if (parseChecksumAlg(alg) !== alg)
        throw BadRequest(
          `parts[${index}].checksums: ${JSON.stringify(alg.slice(0, 64))} is not CRC32, CRC32C, CRC64NVME, SHA1 or SHA256 (in capitals, as listParts writes them)`,
        );
    }
    checked.checksums = digests as Record<string, string>;
  }
  if (lastModified !== undefined) {
    parseDateTime(lastModified, `parts[${index}].lastModified`);
    checked.lastModified = lastModified as string;
  }
  return checked;
}

/** What an entry carries beside its number and ETag must be what the uploaded part holds. */
function checkCompletePartAgainst(entry: CompletePart, part: MultipartPartRecord): void {
  const { partNumber } = entry;
  if (entry.size !== undefined && entry.size !== part.size)
    throw BadRequest(`part ${partNumber} is ${part.size} bytes, not ${entry.size}`);
  for (const [alg, digest] of Object.entries(entry.checksums ?? {})) {
    const kept = part.checksums[alg];
    if (kept === undefined)
      throw BadRequest(`part ${partNumber} was uploaded without a ${alg} checksum to compare`);
    if (kept !== digest)
      throw ChecksumMismatch(`the ${alg} checksum of part ${partNumber} does not match`);
  }
}

/** S3's form: a digest of the parts' tags, a dash and the part count. */
export function multipartEtag(parts: readonly { etag: string }[]): string {
  const hash = createHash('sha256');
  for (const part of parts) hash.update(normalEtag(part.etag));
  return `"${hash.digest('hex').slice(0, 32)}-${parts.length}"`;
}

function combinedChecksums(parts: readonly MultipartPartRecord[]): Record<string, string> {
  const checksums: Record<string, string> = {};
  for (const alg of ['CRC32', 'CRC32C', 'CRC64NVME'] as const satisfies readonly CrcAlg[]) {
    if (!parts.every((part) => part.checksums[alg] !== undefined)) continue;
    let digest: Buffer | undefined;
    for (const part of parts) {
      const next = Buffer.from(part.checksums[alg] as string, 'base64');
      digest =
        digest === undefined
          ? next
          : combineChecksum({ alg, digestA: digest, digestB: next, lengthB: part.size });
    }
    if (digest) checksums[alg] = digest.toString('base64');
  }
  return checksums;
}

/**
 * S3's COMPOSITE checksum of an upload created with SHA-1 or SHA-256 (those have no
 * whole-object form): the digest of the parts' digests joined in order, then `-<parts>`, when
 * every part has one. Other algorithms keep their combined whole-object CRCs.
 */
function compositeChecksums(
  upload: MultipartUploadRecord,
  parts: readonly MultipartPartRecord[],
): Record<string, string> {
  const alg = upload.checksum?.type === 'COMPOSITE' ? upload.checksum.alg : undefined;
  if (alg !== 'SHA1' && alg !== 'SHA256') return {};
  if (!parts.every((part) => part.checksums[alg] !== undefined)) return {};
  const hash = createHash(alg === 'SHA1' ? 'sha1' : 'sha256');
  for (const part of parts) hash.update(Buffer.from(part.checksums[alg] as string, 'base64'));
  return { [alg]: `${hash.digest('base64')}-${parts.length}` };
}

export function abortMultipartUpload(context: EngineContext, args: UploadTarget): void {
  const { tenant, bucket } = requireUpload(context, args);
  const usage = loadUsage(context, tenant.id);
  for (const { key, value } of [
    ...context.store.range<MultipartPartRecord>(
      DB.multipartParts,
      multipartPartRange(bucket.id, args.key, args.uploadId),
    ),
  ]) {
    releasePart(context, { tenantNum: tenant.num, part: value, usage });
    context.store.remove(DB.multipartParts, Buffer.from(key));
  }
  context.store.remove(DB.multipart, multipartUploadKey(bucket.id, args.key, args.uploadId));
  lifecycleOfUpload(
    context,
    bucket,
    { key: args.key, uploadId: args.uploadId, initiatedAt: 0 },
    false,
  );
  saveUsage(context, usage);
}

/**
 * Aborts the uploads in progress in `bucket` (its delete, for S3), releasing at most
 * `partsMax` parts and upload records in this transaction; an upload whose parts are not all
 * released stays, for the background pass to finish once the bucket is gone. Returns that work.
 */
export function abortBucketUploads(
  context: EngineContext,
  args: { tenant: TenantRecord; bucket: BucketRecord; partsMax: number },
): number {
  const { store } = context;
  const prefix = bucketKeyPrefix(args.bucket.id);
  const range = { start: prefix, end: Buffer.concat([prefix, Buffer.from([0xff])]) };
  const uploads = [
    ...store.range<MultipartUploadRecord>(DB.multipart, { ...range, limit: args.partsMax }),
  ];
  if (uploads.length === 0) return 0;
  const usage = loadUsage(context, args.tenant.id);
  // Parts and upload records removed: the transaction's work, bounded by partsMax.
  let work = 0;
  for (const { key: uploadKey, value: upload } of uploads) {
    const room = args.partsMax - work;
    const parts = [
      ...store.range<MultipartPartRecord>(DB.multipartParts, {
        ...multipartPartRange(upload.bucketId, upload.key, upload.uploadId),
        limit: room + 1,
      }),
    ];
    for (const { key, value } of parts.slice(0, room)) {
      releasePart(context, { tenantNum: args.tenant.num, part: value, usage });
      store.remove(DB.multipartParts, Buffer.from(key));
      work += 1;
    }
    if (parts.length > room) break;
    store.remove(DB.multipart, Buffer.from(uploadKey));
    work += 1;
    if (work >= args.partsMax) break;
  }
  saveUsage(context, usage);
  return work;
}

/** True while the bucket has an upload in progress (a bucket delete refuses then). */
export function hasMultipartUploads(store: IndexStore, bucketId: number): boolean {
  const prefix = bucketKeyPrefix(bucketId);
  for (const _entry of store.range(DB.multipart, {
    start: prefix,
    end: Buffer.concat([prefix, Buffer.from([0xff])]),
    limit: 1,
  }))
    return true;
  return false;
}

/**
 * The background pass: aborts uploads initiated before `now - expiryMs`, and uploads whose
 * bucket or tenant is gone, releasing at most `partsMax` parts. Returns the parts and uploads
 * it removed; the caller repeats while that reaches `partsMax`. Inside a transaction.
 */
export function expireMultipartUploads(
  context: EngineContext,
  args: { now: number; expiryMs: number; partsMax: number },
): number {
  const { store } = context;
  let work = 0;
  for (const { key: rawKey, value: upload } of [
    ...store.range<MultipartUploadRecord>(DB.multipart, {}),
  ]) {
    if (work >= args.partsMax) break;
    const tenant = store.get<TenantRecord>(DB.tenants, tenantKey(upload.tenantId));
    const bucket = store.get<BucketRecord>(
      DB.buckets,
      tenantChildKey(upload.tenantId, upload.bucket),
    );
    const orphan = !tenant || tenant.state === 'deleted' || bucket?.id !== upload.bucketId;
    if (!orphan && upload.initiatedAt > args.now - args.expiryMs) continue;
    // A deleted tenant keeps its usage record until its purge completes (or while the purge is
    // blocked); until then releases count there, so usage stays exact. Afterwards they count
    // nowhere.
    const counted =
      tenant !== undefined &&
      (tenant.state !== 'deleted' || store.has(DB.usage, tenantKey(tenant.id)));
    const usage: UsageRecord = counted
      ? loadUsage(context, tenant.id)
      : emptyUsage(upload.tenantId);
    const range = multipartPartRange(upload.bucketId, upload.key, upload.uploadId);
    const parts = [
      ...store.range<MultipartPartRecord>(DB.multipartParts, {
        ...range,
        limit: args.partsMax - work,
      }),
    ];
    for (const { key, value } of parts) {
      if (tenant) releasePart(context, { tenantNum: tenant.num, part: value, usage });
      store.remove(DB.multipartParts, Buffer.from(key));
    }
    work += parts.length;
    if (counted) saveUsage(context, usage);
    if ([...store.range(DB.multipartParts, { ...range, limit: 1 })].length === 0) {
      store.remove(DB.multipart, Buffer.from(rawKey));
      forgetUpload(store, upload);
      work += 1;
    }
  }
  return work;
}

/**
 * Sets every tenant's `usage.partBytes` to the sum of its counted parts, at engine start, where
 * it differs: a release that did not know partBytes (run on this directory and then replaced)
 * completes and aborts parts without taking them out, which would otherwise inflate the quota's
 * measure for good. Reads every in-progress part once; answers how many tenants it corrected.
 * Inside a transaction.
 */
export function reconcilePartBytes(context: EngineContext): number {
  const { store } = context;
  const counted = new Map<string, number>();
  for (const { value: upload } of store.range<MultipartUploadRecord>(DB.multipart, {})) {
    const range = multipartPartRange(upload.bucketId, upload.key, upload.uploadId);
    for (const { value: part } of store.range<MultipartPartRecord>(DB.multipartParts, range)) {
      const bytes = partQuotaBytes(part);
      if (bytes > 0) counted.set(upload.tenantId, (counted.get(upload.tenantId) ?? 0) + bytes);
    }
  }
  // Read whole before the first write: the range is not walked while it changes.
  const wrong = [...store.range<UsageRecord>(DB.usage, {})]
    .map(({ value }) => value)
    .filter((usage) => (usage.partBytes ?? 0) !== (counted.get(usage.tenantId) ?? 0));
  for (const usage of wrong) {
    usage.partBytes = counted.get(usage.tenantId) ?? 0;
    store.put(DB.usage, tenantKey(usage.tenantId), usage);
  }
  return wrong.length;
}
