// The index schema: every LMDB database, its key layout and its record type.
//
// Keys are binary and ordered bytewise, so prefix listing and version order are range scans.
// Values are `src/format/values.ts` records: a schema-version byte and a plain msgpack map.
// docs/on-disk-format.md (Index schema) mirrors this file; a change here changes that section
// in the same commit.
//
// Invariants:
// - Object keys never contain U+0000, so `bucketId | key | 0x00 | seq` groups the versions of a
//   key together and `bucketId | prefix | 0xFF` bounds a prefix scan (0xFF never occurs in UTF-8).
// - Version sequence numbers are engine-wide and strictly increasing; versions of a key sort
//   newest first because the key stores `SEQ_MAX - seq`.

import type { AclRecord } from '../../security/acl.js';
import type { PublicAccessBlock } from '../../security/public-access.js';
import type { LifecycleRuleRecord } from './lifecycle-schema.js';

export const DB = {
  meta: 'meta',
  tenants: 'tenants',
  accounts: 'accounts',
  accessKeys: 'access-keys',
  adminTokens: 'admin-tokens',
  buckets: 'buckets',
  bucketNames: 'bucket-names',
  objects: 'objects',
  versions: 'versions',
  chunks: 'chunks',
  segments: 'segments',
  usage: 'usage',
  audit: 'audit',
  auditByTenant: 'audit-by-tenant',
  idempotency: 'idempotency',
  quotas: 'quotas',
  multipart: 'multipart',
  multipartParts: 'multipart-parts',
  notifications: 'notifications',
  outbox: 'outbox',
  outboxStatus: 'outbox-status',
  // Lifecycle (lifecycle-schema.ts): the due-date index, its reverse map and reindex jobs.
  lifecycleDue: 'lifecycle-due',
  lifecycleSubjects: 'lifecycle-subjects',
  lifecycleJobs: 'lifecycle-jobs',
  // Bucket logging (engine/ops/access-log.ts): access-log records waiting for delivery.
  accessLog: 'access-log',
} as const;

export type DbName = (typeof DB)[keyof typeof DB];

export const SEQ_MAX = Number.MAX_SAFE_INTEGER;
const ZERO = Buffer.from([0]);
const TWO_TO_32 = 2 ** 32;

/**
 * Writes a non-negative integer of at most 53 bits as a u64 big-endian, the same bytes as
 * `writeBigUInt64BE(BigInt(value))` without a BigInt per key.
 */
function writeU64BE(target: Buffer, value: number, offset: number): void {
  target.writeUInt32BE(Math.floor(value / TWO_TO_32), offset);
  target.writeUInt32BE(value >>> 0, offset + 4);
}

// ---- meta -------------------------------------------------------------------------------

export interface Counters {
  nextTenantNum: number;
  nextBucketId: number;
  nextSegmentId: number;
  nextSeq: number;
}

export const META_COUNTERS = Buffer.from('counters');

/** This node's identity (created once by the engine; the cluster routes report it). */
export const META_NODE = Buffer.from('node');

/** The master key's check value (src/engine/master-key-check.ts). */
export const META_MASTER_KEY_CHECK = Buffer.from('masterKeyCheck');

export interface NodeRecord {
  /** `node-` and 16 hex digits, random, never changes. */
  id: string;
  createdAt: number;
}

// ---- tenants, accounts, keys, admin tokens ----------------------------------------------

export type TenantState = 'active' | 'disabled' | 'deleted';

export interface TenantRecord {
  id: string;
  /** The public access block of every bucket of the tenant (set from the console). */
  publicAccessBlock?: PublicAccessBlock;
  num: number;
  name?: string;
  state: TenantState;
  createdAt: number;
  disabledAt?: number;
  /** Why the tenant was disabled (the `reason` of the disable request). */
  disableReason?: string;
  /** The tenant data key sealed under the master key's wrap key. */
  wrappedKey: Buffer;
  /**
   * Earlier data keys, newest first, sealed like `wrappedKey`: chunks written before a data-key
   * rotation stay under them and are read with them (src/engine/ops/key-rotation.ts). Absent
   * for a tenant whose key was never rotated.
   */
  retiredKeys?: RetiredTenantKey[];
  /** Retired keys dropped once every chunk was re-encrypted (src/engine/reencryption.ts). */
  droppedKeys?: number;
  /**
   * Set in the transaction that makes the state `deleted`. While `completedAt` is absent the
   * engine's tenant purger is still removing the tenant's contents in batches (and resumes
   * after a restart); `blockedAt` stops it when a version turns out to be protected.
   */
  deletion?: TenantDeletion;
  /** Named KMS keys SSE-KMS writes may name (engine/ops/kms-keys.ts), in creation order. */
  kmsKeys?: KmsKeyRecord[];
}

export interface KmsKeyRecord {
  id: string;
  description?: string;
  createdAt: number;
}

export interface RetiredTenantKey {
  wrappedKey: Buffer;
  /** When a rotation replaced it (ms). */
  retiredAt: number;
}

export interface TenantDeletion {
  startedAt: number;
  reason: string;
  completedAt?: number;
  blockedAt?: number;
  blockedReason?: string;
}

export interface AccountRecord {
  id: string;
  tenantId: string;
  name?: string;
  createdAt: number;
}

export type AccessKeyState = 'active' | 'revoked';

/**
 * A key that authenticates now: active and not past its expiry. An expired key keeps the stored
 * state `active` (the listings derive `expired`), so every "active keys" question asks this.
 */
export function isLiveKey(key: AccessKeyRecord, now: number): boolean {
  return key.state === 'active' && (key.expiresAt === undefined || key.expiresAt > now);
}

export interface AccessKeyRecord {
  accessKeyId: string;
  tenantId: string;
  accountId: string;
  scopes: string;
  externalRef?: string;
  /** The secret sealed under the secret-seal key. */
  sealedSecret: Buffer;
  state: AccessKeyState;
  createdAt: number;
  expiresAt?: number;
  rotatedAt?: number;
  revokedAt?: number;
  /** The `reason` of the revoke request (or of the tenant disable that revoked the key). */
  revokedReason?: string;
}

export type AdminRole = 'viewer' | 'operator' | 'owner';

export interface AdminTokenRecord {
  tokenId: string;
  /** SHA-256 of the whole token, hex. The token itself is never stored. */
  hash: string;
  role: AdminRole;
  tenant?: string;
  name?: string;
  createdAt: number;
  expiresAt?: number;
  revokedAt?: number;
}

export function tenantKey(tenantId: string): Buffer {
  return Buffer.from(tenantId, 'utf8');
}

/** `tenantId | 0x00 | name`: the accounts and buckets of a tenant are one range. */
export function tenantChildKey(tenantId: string, name: string): Buffer {
  // One allocation: these keys are made for every request.
  const at = Buffer.byteLength(tenantId, 'utf8');
  const key = Buffer.allocUnsafe(at + 1 + Buffer.byteLength(name, 'utf8'));
  key.write(tenantId, 0, 'utf8');
  key[at] = 0;
  key.write(name, at + 1, 'utf8');
  return key;
}

/**
 * The id under which `IndexStore.getSharedById` keeps the bucket `name` of `tenantId`, made
 * without its key's bytes. U+0100 is in no tenant id and in no id made from a key's bytes (those
 * are latin-1 text), so no two buckets, nor another record read by its key, share one.
 */
export function bucketSharedId(tenantId: string, name: string): string {
  return `${tenantId}\u0100${name}`;
}

/** The key of the bucket whose `bucketSharedId` is `id`. */
export function bucketKeyOfSharedId(id: string): Buffer {
  const at = id.indexOf('\u0100');
  return tenantChildKey(id.slice(0, at), id.slice(at + 1));
}

/** The key of an access key's record: its id's bytes. */
export function accessKeyKey(accessKeyId: string): Buffer {
  return Buffer.from(accessKeyId, 'utf8');
}

export function tenantChildRange(tenantId: string): { start: Buffer; end: Buffer } {
  const base = Buffer.from(tenantId, 'utf8');
  return { start: Buffer.concat([base, ZERO]), end: Buffer.concat([base, Buffer.from([1])]) };
}

// ---- buckets ------------------------------------------------------------------------------

export type Versioning = 'Unversioned' | 'Enabled' | 'Suspended';

export interface BucketRecord {
  id: number;
  tenantId: string;
  name: string;
  createdAt: number;
  versioning: Versioning;
  objectLock: boolean;
  /** Object lock's default retention for new versions (engine/ops/object-lock.ts). */
  lockDefault?: { mode: RetentionMode; days?: number; years?: number };
  /** The bucket's own tags (S3's bucket tagging); absent: none. */
  tags?: ObjectTag[];
  /** S3's default encryption as configured (every object is encrypted at rest regardless). */
  encryption?: ServerSideEncryption;
  /** Browser CORS rules (src/security/cors.ts validates them); absent: none. */
  cors?: CorsRuleRecord[];
  /**
   * The bucket policy (src/security/policy.ts evaluates both forms): the native explicit-deny
   * form (src/security/bucket-policy.ts), or an AWS policy document (`{document}`, S3's).
   */
  policy?:
    | {
        version: 1;
        statements: Array<{
          effect: 'Deny';
          actions: string[];
          principals: string[];
          prefix?: string;
        }>;
      }
    | { document: string };
  /** The bucket's S3 ACL (src/security/acl.ts); absent: private to its tenant. */
  acl?: AclRecord;
  /** The bucket's public access block (src/security/public-access.ts); absent: none. */
  publicAccessBlock?: PublicAccessBlock;
  /** Lifecycle rules (src/service/lifecycle.ts validates them); absent: none. */
  lifecycle?: LifecycleRuleRecord[];
  /** S3 bucket logging of this bucket's requests (engine/ops/access-log.ts); absent: off. */
  logging?: BucketLoggingRecord;
  /** S3 Object Ownership (service/ownership.ts); absent: none set (ObjectWriter's behaviour). */
  ownership?: ObjectOwnership;
}

/** S3's OwnershipControls rule: who owns new objects, and whether ACLs apply at all. */
export type ObjectOwnership = 'BucketOwnerEnforced' | 'BucketOwnerPreferred' | 'ObjectWriter';

/** Where a source bucket's access-log records go (S3's LoggingEnabled). */
export interface BucketLoggingRecord {
  targetBucket: string;
  /** Prepended to every log object's key; may be ''. */
  targetPrefix: string;
  /** `simple`: [prefix]YYYY-mm-DD-HH-MM-SS-id; `partitioned`: account/region/bucket/ first. */
  keyFormat: 'simple' | 'partitioned';
  /** Partitioned keys only: the date the partition names. */
  dateSource?: 'EventTime' | 'DeliveryTime';
  /** When the configuration last changed (GetBucketLogging's Last-Modified), ms. */
  updatedAt: number;
}

/**
 * `access-log`: `utf8(stream) | 0x00 | auditKey` → one access-log record waiting for delivery.
 * A stream is a target bucket and key prefix (`target/prefix`): the records that go into the
 * same log objects, in the order the engine wrote them.
 */
export interface AccessLogRecord {
  /** The S3 server-access-log line, without its newline. */
  line: string;
  sourceBucket: string;
  /** The source bucket's tenant (aws:SourceAccount of the delivery). */
  sourceTenant: string;
  time: number;
}

export function accessLogKey(stream: string, auditKeyBytes: Buffer): Buffer {
  return Buffer.concat([Buffer.from(stream, 'utf8'), ZERO, auditKeyBytes]);
}

/**
 * `bucket-names`: `utf8(name)` → the tenant that holds the name. Bucket names are global across
 * the deployment (DECISIONS.md): the bucket commands keep this index in the transaction that
 * creates or removes a bucket, and the engine checks it against `buckets` at every start.
 */
export interface BucketNameRecord {
  tenantId: string;
}

export function bucketNameKey(name: string): Buffer {
  return Buffer.from(name, 'utf8');
}

// ---- objects and versions -----------------------------------------------------------------

export interface ObjectVersionRecord {
  key: string;
  /** 'null' for the null version (unversioned or suspended writes), else a generated id. */
  versionId: string;
  seq: number;
  lastModified: number;
  deleteMarker?: boolean;
  size: number;
  etag: string;
  contentType: string;
  metadata: Record<string, string>;
  /**
   * Representation headers an S3 write stored (`cache-control`, `content-disposition`,
   * `content-encoding`, `content-language`, `expires`, by lower-case name); absent otherwise.
   */
  headers?: Record<string, string>;
  /** Base64 big-endian digests by algorithm name; CRC32C is always present for objects. */
  checksums: Record<string, string>;
  /** Chunk references: 32-byte chunk id and u32 LE plain length each, concatenated. */
  chunks: Buffer;
  /** Bytes stored after compression (sum over first references of each chunk). */
  storedBytes: number;
  compressed: boolean;
  tags?: ObjectTag[];
  /** The encryption S3 reports for the version when it is not the default (SSE-S3, AES256). */
  sse?: ServerSideEncryption;
  retention?: { mode: RetentionMode; retainUntil: number };
  legalHold?: 'ON' | 'OFF';
  /** A completed multipart upload's part sizes, in part order (reads by part number). */
  partSizes?: number[];
  /** Its parts' checksums of the upload's algorithm, in part order (GetObjectAttributes). */
  partChecksums?: { alg: string; values: string[] };
  /** SSE-C: the version's bytes are encrypted under its customer's key (service/customer-key.ts). */
  sseCustomer?: SseCustomerRecord;
}

/**
 * What the index keeps of an SSE-C key: never the key, only a random salt and a verifier derived
 * from the key and the salt (HKDF-SHA256), so a request's key is checked in constant time and
 * the data key is derived from the key the client sends. A completed multipart upload keeps the
 * salt of each listed part (16 bytes each, in part order): every part has its own data key.
 */
export interface SseCustomerRecord {
  salt: Buffer;
  verifier: Buffer;
  partSalts?: Buffer;
}

export interface ObjectTag {
  key: string;
  value: string;
}

export type RetentionMode = 'GOVERNANCE' | 'COMPLIANCE';

/**
 * How S3 sees an object's encryption: `AES256` (SSE-S3) or `aws:kms` with the tenant key id it
 * names (src/service/encryption.ts). The bytes are encrypted under the tenant's data key either
 * way.
 */
export interface ServerSideEncryption {
  algorithm: 'AES256' | 'aws:kms';
  kmsKeyId?: string;
}

/** True while a version may not be deleted or overwritten in place. */
export function versionLocked(version: ObjectVersionRecord, now: number): boolean {
  return (
    version.legalHold === 'ON' ||
    (version.retention !== undefined && version.retention.retainUntil > now)
  );
}

export const CHUNK_REF_SIZE = 36;

export function bucketKeyPrefix(bucketId: number): Buffer {
  const key = Buffer.alloc(4);
  key.writeUInt32BE(bucketId, 0);
  return key;
}

export function objectKey(bucketId: number, key: string): Buffer {
  // One allocation: a key is made for every object request, on both sides of the engine socket.
  const bytes = Buffer.allocUnsafe(4 + Buffer.byteLength(key, 'utf8'));
  bytes.writeUInt32BE(bucketId, 0);
  bytes.write(key, 4, 'utf8');
  return bytes;
}

/** The exclusive end of every key in a bucket that starts with `prefix`. */
export function prefixRange(bucketId: number, prefix: string): { start: Buffer; end: Buffer } {
  const start = objectKey(bucketId, prefix);
  return { start, end: Buffer.concat([start, Buffer.from([0xff])]) };
}

export function versionKey(bucketId: number, key: string, seq: number): Buffer {
  const suffix = Buffer.alloc(9);
  writeU64BE(suffix, SEQ_MAX - seq, 1);
  return Buffer.concat([objectKey(bucketId, key), suffix]);
}

export function versionRange(bucketId: number, key: string): { start: Buffer; end: Buffer } {
  const base = objectKey(bucketId, key);
  return { start: Buffer.concat([base, ZERO]), end: Buffer.concat([base, Buffer.from([1])]) };
}

export function decodeObjectKey(raw: Buffer): string {
  return raw.toString('utf8', 4);
}

// ---- chunks and segments ------------------------------------------------------------------

export interface ChunkRecord {
  segmentId: number;
  offset: number;
  /** Whole record length (header and payload). */
  length: number;
  plainLength: number;
  payloadChecksum: number;
  refs: number;
  /** When refs last fell to zero (ms); dead chunks are reclaimed after a grace period. */
  deadSince?: number;
}

export function chunkKey(tenantNum: number, chunkId: Uint8Array): Buffer {
  const key = Buffer.alloc(36);
  key.writeUInt32BE(tenantNum, 0);
  key.set(chunkId, 4);
  return key;
}

/** `deleted`: its file is being removed; the record goes once the file is gone. */
export type SegmentState = 'open' | 'sealed' | 'retired' | 'deleted';

export interface SegmentRecord {
  id: number;
  state: SegmentState;
  /** The process appending to an open segment. */
  ownerPid?: number;
  createdAt: number;
  /** File size once sealed. */
  size?: number;
  /** Bytes of records that live chunks reference. */
  liveBytes: number;
  sealedAt?: number;
  retiredAt?: number;
  /**
   * When an fdatasync of the segment first failed (segment-syncer.ts): its unsynced bytes may
   * be lost, so no commit may point into it again, across engine restarts too.
   */
  syncFailedAt?: number;
}

export function segmentKey(segmentId: number): Buffer {
  const key = Buffer.allocUnsafe(8);
  writeU64BE(key, segmentId, 0);
  return key;
}

// ---- usage --------------------------------------------------------------------------------

export interface UsageRecord {
  tenantId: string;
  logicalBytes: number;
  physicalBytes: number;
  objects: number;
  versions: number;
  deleteMarkers: number;
  /**
   * Sizes of the parts of uploads in progress that count against the quota (parts with
   * `quotaCounted`); absent: 0. Complete moves them into `logicalBytes`, abort releases them.
   */
  partBytes?: number;
  /** Per bucket, by name; kept by the same transactions as the totals. */
  buckets?: Record<string, BucketUsageRecord>;
}

export interface BucketUsageRecord {
  logicalBytes: number;
  objects: number;
  versions: number;
  deleteMarkers: number;
}

export function emptyUsage(tenantId: string): UsageRecord {
  return { tenantId, logicalBytes: 0, physicalBytes: 0, objects: 0, versions: 0, deleteMarkers: 0 };
}

// ---- audit --------------------------------------------------------------------------------

export type AuditOutcome = 'allowed' | 'denied' | 'error';

export interface AuditEvent {
  id: string;
  time: number;
  requestId: string;
  tenantId?: string;
  actor: string;
  action: string;
  resource: string;
  outcome: AuditOutcome;
  status: number;
  reason?: string;
  remoteAddr?: string;
  dryRun?: boolean;
}

/** `time u64 BE | sequence u64 BE`: rows sort by time; the id is the key in hex. */
export function auditKey(time: number, sequence: number): Buffer {
  const key = Buffer.allocUnsafe(16);
  writeU64BE(key, time, 0);
  writeU64BE(key, sequence, 8);
  return key;
}

/** `tenantId | 0x00 | auditKey`: one tenant's rows as one range. */
export function auditTenantKey(tenantId: string, key: Buffer): Buffer {
  return Buffer.concat([Buffer.from(tenantId, 'utf8'), ZERO, key]);
}

// ---- idempotency --------------------------------------------------------------------------

export interface IdempotencyRecord {
  state: 'running' | 'done';
  /** Digest of what the key is bound to: checksum headers, content length, user metadata. */
  fingerprint: string;
  startedAt: number;
  expiresAt: number;
  /**
   * Of a `running` record: the pid of the gateway whose request holds the key. Once that process
   * is gone its request is dead and a retry takes the key over at once.
   */
  ownerPid?: number;
  /**
   * Of a `running` record: the claim id its begin drew (16 hex digits). Only a commit or abandon
   * that carries it may complete or free the key.
   */
  claim?: string;
  /** The committed version, replayed to a retry. */
  result?: ObjectVersionRecord;
}

/** `tenantId | 0x00 | bucket | 0x00 | idempotency key`. */
export function idempotencyKey(tenantId: string, bucket: string, key: string): Buffer {
  return Buffer.concat([
    Buffer.from(tenantId, 'utf8'),
    ZERO,
    Buffer.from(bucket, 'utf8'),
    ZERO,
    Buffer.from(key, 'utf8'),
  ]);
}

// ---- quotas -------------------------------------------------------------------------------

export interface QuotaRecord {
  tenantId: string;
  maxBytes?: number;
  maxObjects?: number;
}

// ---- CORS -----------------------------------------------------------------------------------

/** One bucket CORS rule, as src/security/cors.ts validates it (the spec's JSON shape). */
export interface CorsRuleRecord {
  id?: string;
  allowedOrigins: string[];
  allowedMethods: string[];
  allowedHeaders: string[];
  exposeHeaders: string[];
  maxAgeSeconds?: number;
}

// ---- multipart uploads --------------------------------------------------------------------

/** Upload ids are 16 bytes (6 bytes of creation time in ms, 10 random), 32 hex digits as text. */
export const UPLOAD_ID_BYTES = 16;

export interface MultipartUploadRecord {
  uploadId: string;
  tenantId: string;
  bucketId: number;
  bucket: string;
  key: string;
  initiatedAt: number;
  /** S3's Initiator: the tenant that created the upload, when not the bucket's own. */
  initiator?: string;
  contentType: string;
  metadata: Record<string, string>;
  /** The completed object's representation headers (ObjectVersionRecord.headers), if any. */
  headers?: Record<string, string>;
  /** The checksum the client chose at create (S3's x-amz-checksum-algorithm and -type). */
  checksum?: { alg: string; type: 'COMPOSITE' | 'FULL_OBJECT' };
  /** The completed object's lock and tags as the create asked (engine/ops/object-lock.ts). */
  lock?: { mode?: RetentionMode; retainUntil?: number; legalHold?: 'ON' | 'OFF' };
  tags?: ObjectTag[];
  sse?: ServerSideEncryption;
  /** SSE-C: the key every part and the completed object are under (its verifier). */
  sseCustomer?: SseCustomerRecord;
}

export interface MultipartPartRecord {
  partNumber: number;
  size: number;
  /** The part's entity tag (the chunk-list digest of its bytes, as for objects). */
  etag: string;
  /** Base64 big-endian digests; CRC32C and SHA256 always, plus every checksum the client sent. */
  checksums: Record<string, string>;
  /** Chunk references, packed as in object versions; the part holds one reference each. */
  chunks: Buffer;
  storedBytes: number;
  compressed: boolean;
  lastModified: number;
  /**
   * The part's size is in its tenant's `UsageRecord.partBytes`. Parts stored before parts counted
   * against the quota lack it; they count nowhere until complete makes them a version.
   */
  quotaCounted?: true;
  /** SSE-C: the salt of this part's data key (the upload's `sseCustomer` says whose key). */
  sseSalt?: Buffer;
}

/** `u32be(bucketId) | utf8(key) | 0x00 | uploadId[16]`: a bucket's uploads sort by key. */
export function multipartUploadKey(bucketId: number, key: string, uploadId: string): Buffer {
  return Buffer.concat([objectKey(bucketId, key), ZERO, Buffer.from(uploadId, 'hex')]);
}

/** `multipart upload key | u32be(partNumber)`: an upload's parts are one range, in order. */
export function multipartPartKey(
  bucketId: number,
  key: string,
  uploadId: string,
  partNumber: number,
): Buffer {
  const part = Buffer.alloc(4);
  part.writeUInt32BE(partNumber, 0);
  return Buffer.concat([multipartUploadKey(bucketId, key, uploadId), part]);
}

export function multipartPartRange(
  bucketId: number,
  key: string,
  uploadId: string,
): { start: Buffer; end: Buffer } {
  const base = multipartUploadKey(bucketId, key, uploadId);
  return { start: base, end: Buffer.concat([base, Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff])]) };
}

// ---- event notifications ------------------------------------------------------------------

export type ObjectEventType = 'object-created' | 'object-removed';

export interface NotificationConfigRecord {
  id: string;
  type: 'webhook';
  url: string;
  events: ObjectEventType[];
  prefix?: string;
  suffix?: string;
  /** The signing secret sealed under the secret-seal key, AAD `webhook:<tenantId>:<bucketId>:<id>`. */
  sealedSecret: Buffer;
  createdAt: number;
}

/** Key `u32be(bucketId)`. Outlives its bucket until the bucket's outbox has drained. */
export interface BucketNotificationsRecord {
  tenantId: string;
  bucketId: number;
  bucket: string;
  configs: NotificationConfigRecord[];
  updatedAt: number;
}

/** The JSON body a webhook receives (spec/DECISIONS.md). */
export interface ObjectEventRecord {
  id: string;
  type: ObjectEventType;
  time: string;
  tenantId: string;
  bucket: string;
  key: string;
  versionId?: string;
  size?: number;
  etag?: string;
}

/**
 * One pending delivery: key `u32be(bucketId) | utf8(configId) | 0x00 | u64be(seq)`, so each
 * (bucket, config) queue is one range in commit order and its first row is its head.
 */
export interface OutboxRecord {
  seq: number;
  tenantId: string;
  bucketId: number;
  configId: string;
  event: ObjectEventRecord;
  createdAt: number;
  attempts: number;
  nextAttemptAt: number;
  lastAttemptAt?: number;
  lastError?: string;
}

/** Key `u32be(bucketId)`: delivery counters of a bucket, kept by the outbox transactions. */
export interface OutboxStatusRecord {
  bucketId: number;
  tenantId: string;
  bucket: string;
  pending: number;
  delivered: number;
  failedAttempts: number;
  /** Events dropped: their config was removed, or they failed for the whole retry window. */
  discarded: number;
  lastError?: string;
  lastErrorAt?: number;
  lastDeliveredAt?: number;
}

export function outboxKey(bucketId: number, configId: string, seq: number): Buffer {
  const suffix = Buffer.alloc(9);
  writeU64BE(suffix, seq, 1);
  return Buffer.concat([bucketKeyPrefix(bucketId), Buffer.from(configId, 'utf8'), suffix]);
}

/** The queue of one (bucket, config): every row of it, head first. */
export function outboxQueueRange(
  bucketId: number,
  configId: string,
): { start: Buffer; end: Buffer } {
  const base = Buffer.concat([bucketKeyPrefix(bucketId), Buffer.from(configId, 'utf8')]);
  return { start: Buffer.concat([base, ZERO]), end: Buffer.concat([base, Buffer.from([1])]) };
}

export function decodeOutboxKey(raw: Buffer): { bucketId: number; configId: string; seq: number } {
  return {
    bucketId: raw.readUInt32BE(0),
    configId: raw.toString('utf8', 4, raw.length - 9),
    seq: Number(raw.readBigUInt64BE(raw.length - 8)),
  };
}
