// The lifecycle part of the index schema: a bucket's rules (kept on its `BucketRecord`), the
// due-date index, its reverse map, and the reindex jobs that follow a configuration change.
//
// Invariants:
// - Every entry of `lifecycle-due` has exactly one `lifecycle-subjects` row naming the same due
//   time, and the other way round: both are written and removed together (lifecycle-index.ts).
// - A subject is one version (`kind` 1) or one multipart upload (`kind` 2) of a bucket; its due
//   time is the earliest moment a rule of the bucket acts on it. The executor checks the rule
//   again when the time comes, so an entry that an unfinished reindex left behind is moved or
//   dropped, never acted on blindly.
// - Due keys start with the due time: what is due at `now` is the range below `dueKeyEnd(now)`.
//
// docs/on-disk-format.md (Index schema) describes these rows; a change here changes it too.

import type { ObjectTag } from './schema.js';

/** How a rule's filter was written, so GetBucketLifecycleConfiguration answers it as it came. */
export type LifecycleFilterForm = 'prefix' | 'filter' | 'and';

export interface LifecycleFilterRecord {
  /** `prefix`: the legacy `<Prefix>` of the rule; `filter`: `<Filter>`; `and`: `<Filter><And>`. */
  form: LifecycleFilterForm;
  prefix?: string;
  tags?: ObjectTag[];
  sizeGreaterThan?: number;
  sizeLessThan?: number;
}

export interface LifecycleRuleRecord {
  id: string;
  status: 'Enabled' | 'Disabled';
  filter: LifecycleFilterRecord;
  /** `date` is midnight UTC in ms; `expiredObjectDeleteMarker` only without days and date. */
  expiration?: { days?: number; date?: number; expiredObjectDeleteMarker?: boolean };
  noncurrentExpiration?: { noncurrentDays: number; newerNoncurrentVersions?: number };
  abortIncompleteMultipartUpload?: { daysAfterInitiation: number };
}

export const SUBJECT_VERSION = 1;
export const SUBJECT_UPLOAD = 2;
export type SubjectKind = typeof SUBJECT_VERSION | typeof SUBJECT_UPLOAD;

/** `lifecycle-due` value: where the subject lives, to find its bucket without a scan. */
export interface LifecycleDueRecord {
  tenantId: string;
  bucket: string;
}

/** `lifecycle-subjects` value: the due time of the subject's one `lifecycle-due` entry. */
export interface LifecycleSubjectRecord {
  due: number;
}

export type LifecycleJobPhase = 'versions' | 'uploads' | 'clear';

/** `lifecycle-jobs` value: a reindex of one bucket in bounded steps, resumed after a restart. */
export interface LifecycleJobRecord {
  bucketId: number;
  tenantId: string;
  bucket: string;
  phase: LifecycleJobPhase;
  /** The last `versions` or `multipart` (or `lifecycle-subjects`) key done in this phase. */
  after?: Buffer;
  startedAt: number;
}

const ZERO = Buffer.from([0]);
const TWO_TO_32 = 2 ** 32;

function u32(value: number): Buffer {
  const bytes = Buffer.alloc(4);
  bytes.writeUInt32BE(value, 0);
  return bytes;
}

function u64(value: number): Buffer {
  const bytes = Buffer.alloc(8);
  bytes.writeUInt32BE(Math.floor(value / TWO_TO_32), 0);
  bytes.writeUInt32BE(value >>> 0, 4);
  return bytes;
}

/** `u32be(bucketId) | u8(1) | utf8(key) | 0x00 | u64be(seq)`: one version. */
export function versionSubjectKey(bucketId: number, key: string, seq: number): Buffer {
  return Buffer.concat([
    u32(bucketId),
    Buffer.from([SUBJECT_VERSION]),
    Buffer.from(key, 'utf8'),
    ZERO,
    u64(seq),
  ]);
}

/** `u32be(bucketId) | u8(2) | utf8(key) | 0x00 | uploadId[16]`: one multipart upload. */
export function uploadSubjectKey(bucketId: number, key: string, uploadId: string): Buffer {
  return Buffer.concat([
    u32(bucketId),
    Buffer.from([SUBJECT_UPLOAD]),
    Buffer.from(key, 'utf8'),
    ZERO,
    Buffer.from(uploadId, 'hex'),
  ]);
}

export interface DecodedSubject {
  bucketId: number;
  kind: SubjectKind;
  key: string;
  /** The version's seq (kind 1). */
  seq: number;
  /** The upload id in hex (kind 2). */
  uploadId: string;
}

export function decodeSubjectKey(raw: Buffer): DecodedSubject {
  const kind = raw.readUInt8(4);
  const idBytes = kind === SUBJECT_VERSION ? 8 : 16;
  const key = raw.toString('utf8', 5, raw.length - idBytes - 1);
  const id = raw.subarray(raw.length - idBytes);
  return {
    bucketId: raw.readUInt32BE(0),
    kind: kind === SUBJECT_VERSION ? SUBJECT_VERSION : SUBJECT_UPLOAD,
    key,
    seq: kind === SUBJECT_VERSION ? id.readUInt32BE(0) * TWO_TO_32 + id.readUInt32BE(4) : 0,
    uploadId: kind === SUBJECT_UPLOAD ? id.toString('hex') : '',
  };
}

/** Every subject of a bucket: one range of `lifecycle-subjects`. */
export function bucketSubjectRange(bucketId: number): { start: Buffer; end: Buffer } {
  return { start: u32(bucketId), end: u32(bucketId + 1) };
}

/** `u64be(dueMs) | subject key`. */
export function dueKey(due: number, subject: Buffer): Buffer {
  return Buffer.concat([u64(due), subject]);
}

/** The exclusive end of every entry due at or before `now`. */
export function dueKeyEnd(now: number): Buffer {
  return u64(now + 1);
}

export function decodeDueKey(raw: Buffer): { due: number; subject: Buffer } {
  return {
    due: raw.readUInt32BE(0) * TWO_TO_32 + raw.readUInt32BE(4),
    subject: raw.subarray(8),
  };
}

export function jobKey(bucketId: number): Buffer {
  return u32(bucketId);
}
