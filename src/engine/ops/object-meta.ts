// Commands on bucket settings and on existing versions: versioning state, tags, retention,
// legal hold, and server-side copy (which shares the source's chunks instead of rewriting
// bytes).

import {
  DB,
  tenantChildKey,
  objectKey,
  versionKey,
  type BucketRecord,
  type ObjectVersionRecord,
  type ObjectTag,
  type ServerSideEncryption,
} from '../index/schema.js';
import type { EngineContext } from './context.js';
import { requireActiveTenant } from './control.js';
import {
  requireBucket,
  findVersion,
  writeVersion,
  addChunkRefs,
  unpackChunkRefs,
  loadUsage,
  saveUsage,
  nextVersionOf,
  etagListMatches,
  checkWriteConditions,
  replacedNullIn,
  deleteMarkerNamed,
} from './objects.js';
import { checkQuota } from './quota.js';
import { recordObjectEvent } from './notifications.js';
import { reindexVersion } from './lifecycle-index.js';
import { parseBucketPolicy } from '../../security/bucket-policy.js';
import { newVersionSse } from './encryption.js';
import { checkRetentionChange, newVersionLock, type NewVersionLock } from './object-lock.js';
import { BadRequest, Conflict, NotFound, PreconditionFailed } from '../../util/errors.js';

export function setVersioning(
  context: EngineContext,
  // Unknown until checked: the native API passes its client's JSON field as it came.
  args: { tenantId: string; bucket: string; status: unknown },
): BucketRecord {
  requireActiveTenant(context, args.tenantId);
  const bucket = requireBucket(context, args.tenantId, args.bucket);
  if (args.status !== 'Enabled' && args.status !== 'Suspended')
    throw BadRequest('status must be "Enabled" or "Suspended"');
  if (bucket.objectLock && args.status === 'Suspended')
    throw Conflict('versioning cannot be suspended on an object-lock bucket');
  bucket.versioning = args.status;
  context.store.put(DB.buckets, tenantChildKey(args.tenantId, args.bucket), bucket);
  return bucket;
}

export function setBucketPolicy(
  context: EngineContext,
  args: { tenantId: string; bucket: string; policy: unknown },
): BucketRecord {
  requireActiveTenant(context, args.tenantId);
  const bucket = requireBucket(context, args.tenantId, args.bucket);
  if (args.policy === null || args.policy === undefined) delete bucket.policy;
  else bucket.policy = parseBucketPolicy(args.policy) as NonNullable<BucketRecord['policy']>;
  context.store.put(DB.buckets, tenantChildKey(args.tenantId, args.bucket), bucket);
  return bucket;
}

/** Sets (or, with an empty list, clears) a bucket's tags, checked by the service. */
export function setBucketTags(
  context: EngineContext,
  args: { tenantId: string; bucket: string; tags: ObjectTag[] },
): BucketRecord {
  requireActiveTenant(context, args.tenantId);
  const bucket = requireBucket(context, args.tenantId, args.bucket);
  if (!Array.isArray(args.tags) || args.tags.length > 50)
    throw BadRequest('a bucket has at most 50 tags');
  if (args.tags.length === 0) delete bucket.tags;
  else bucket.tags = args.tags;
  context.store.put(DB.buckets, tenantChildKey(args.tenantId, args.bucket), bucket);
  return bucket;
}

export interface VersionTarget {
  tenantId: string;
  bucket: string;
  key: string;
  versionId?: string;
}

/**
 * The version a request names (its versionId, else the current one). A delete marker named by
 * its id is refused as S3 refuses it: a copy source is 400, and tags, retention and legal hold
 * are 405 (a marker has none), with the marker's headers; a key whose latest is one is 404.
 */
export function targetVersion(
  context: EngineContext,
  args: VersionTarget,
  role: 'subject' | 'copy source' = 'subject',
): { bucket: BucketRecord; version: ObjectVersionRecord } {
  requireActiveTenant(context, args.tenantId);
  const bucket = requireBucket(context, args.tenantId, args.bucket);
  const version =
    args.versionId === undefined
      ? context.store.get<ObjectVersionRecord>(DB.objects, objectKey(bucket.id, args.key))
      : findVersion(context, bucket.id, args.key, args.versionId);
  if (version?.deleteMarker && args.versionId !== undefined) {
    if (role === 'copy source')
      throw BadRequest(
        `the copy source, version ${version.versionId} of ${args.key}, is a delete marker`,
      );
    throw deleteMarkerNamed(version, '');
  }
  if (!version || version.deleteMarker) throw NotFound(`object ${args.key} not found`);
  return { bucket, version };
}

/** Rewrites a version's record in place (and the current copy when it is the current one). */
export function saveVersion(
  context: EngineContext,
  bucket: BucketRecord,
  version: ObjectVersionRecord,
): void {
  context.store.put(DB.versions, versionKey(bucket.id, version.key, version.seq), version);
  const current = context.store.get<ObjectVersionRecord>(
    DB.objects,
    objectKey(bucket.id, version.key),
  );
  if (current && current.seq === version.seq)
    context.store.put(DB.objects, objectKey(bucket.id, version.key), version);
  // Tag filters read the tags: their change can move the version's due time.
  if (bucket.lifecycle) reindexVersion(context, bucket, version);
}

export function putObjectTags(
  context: EngineContext,
  args: VersionTarget & { tags: ObjectTag[] },
): ObjectVersionRecord {
  const { bucket, version } = targetVersion(context, args);
  if (args.tags.length === 0) delete version.tags;
  else version.tags = args.tags;
  saveVersion(context, bucket, version);
  return version;
}

/**
 * Sets, extends or (mode null) removes a version's retention, under object lock's rules
 * (object-lock.ts): only an extension in the same mode unless GOVERNANCE is bypassed.
 */
export function putRetention(
  context: EngineContext,
  args: VersionTarget & { mode: unknown; retainUntil?: number; bypassGovernance?: boolean },
): ObjectVersionRecord {
  const { bucket, version } = targetVersion(context, args);
  if (!bucket.objectLock) throw BadRequest('retention needs a bucket created with objectLock');
  let next: ObjectVersionRecord['retention'];
  if (args.mode !== null) {
    if (args.mode !== 'GOVERNANCE' && args.mode !== 'COMPLIANCE')
      throw BadRequest('mode must be GOVERNANCE or COMPLIANCE');
    if (typeof args.retainUntil !== 'number' || !Number.isFinite(args.retainUntil))
      throw BadRequest('retainUntil must be a date');
    next = { mode: args.mode, retainUntil: args.retainUntil };
  }
  checkRetentionChange(version.retention, next, context.now(), args.bypassGovernance === true);
  if (next) version.retention = next;
  else delete version.retention;
  saveVersion(context, bucket, version);
  return version;
}

export function putLegalHold(
  context: EngineContext,
  args: VersionTarget & { status: unknown },
): ObjectVersionRecord {
  const { bucket, version } = targetVersion(context, args);
  if (!bucket.objectLock) throw BadRequest('legal hold needs a bucket created with objectLock');
  if (args.status !== 'ON' && args.status !== 'OFF') throw BadRequest('status must be ON or OFF');
  version.legalHold = args.status;
  saveVersion(context, bucket, version);
  return version;
}

/** A copy source's conditions (S3's x-amz-copy-source-if-*; dates in epoch milliseconds). */
export interface SourceConditions {
  readonly ifMatch?: string | undefined;
  readonly ifNoneMatch?: string | undefined;
  readonly ifModifiedSince?: number | undefined;
  readonly ifUnmodifiedSince?: number | undefined;
}

export interface CopyObjectArgs {
  tenantId: string;
  bucket: string;
  key: string;
  sourceBucket: string;
  sourceKey: string;
  sourceVersionId?: string;
  metadataDirective: 'COPY' | 'REPLACE';
  contentType?: string;
  metadata?: Record<string, string>;
  /** REPLACE's representation headers (S3's; ObjectVersionRecord.headers); COPY keeps the source's. */
  headers?: Record<string, string>;
  /** Source conditions (S3's x-amz-copy-source-if-*). */
  ifMatch?: string;
  ifNoneMatch?: string;
  ifModifiedSince?: number;
  ifUnmodifiedSince?: number;
  /** Destination conditions: the body's, then the request's (WriteConditions). */
  requireAbsent?: boolean;
  requireMatchEtag?: string;
  destinationIfMatch?: string;
  destinationIfNoneMatch?: string;
  destinationIfUnmodifiedSince?: number;
  /** The copy's lock (never the source's, as S3: explicit, else the bucket's default). */
  lock?: NewVersionLock;
  /** The copy's tags (S3's tagging directive REPLACE); absent: the source's tags. */
  tags?: ObjectTag[];
  /** The copy's S3 encryption (never the source's: the request's, else the bucket's). */
  sse?: ServerSideEncryption;
}

export function copyObject(context: EngineContext, args: CopyObjectArgs): ObjectVersionRecord {
  const tenant = requireActiveTenant(context, args.tenantId);
  const source = targetVersion(
    context,
    {
      tenantId: args.tenantId,
      bucket: args.sourceBucket,
      key: args.sourceKey,
      ...(args.sourceVersionId === undefined ? {} : { versionId: args.sourceVersionId }),
    },
    'copy source',
  ).version;
  checkSourceConditions(source, args);
  // Its bytes are under its customer's key, which a copy that shares chunks cannot change or
  // check: the service copies such a version by reading and writing it again (service/copy.ts).
  if (source.sseCustomer !== undefined)
    throw BadRequest('an SSE-C version is copied with its key, by the S3 API');
  const bucket = requireBucket(context, tenant.id, args.bucket);
  const current = context.store.get<ObjectVersionRecord>(
    DB.objects,
    objectKey(bucket.id, args.key),
  );
  if (args.requireAbsent && current) throw PreconditionFailed('the destination exists');
  checkWriteConditions(current, { ifMatch: args.requireMatchEtag });
  const locked = {
    ...newVersionLock(context, bucket, args.lock),
    ...newVersionSse(bucket, args.sse),
  };
  checkWriteConditions(current, {
    ifMatch: args.destinationIfMatch,
    ifNoneMatch: args.destinationIfNoneMatch,
    ifUnmodifiedSince: args.destinationIfUnmodifiedSince,
  });
  const replaced = replacedNullIn(context.store, bucket, args.key, current);
  checkQuota(context, tenant.id, source.size - (replaced?.size ?? 0), current ? 0 : 1);
  const usage = loadUsage(context, tenant.id);
  const storedBytes = addChunkRefs(context, tenant.num, unpackChunkRefs(source.chunks), usage);
  const { seq, versionId } = nextVersionOf(context, bucket);
  const replace = args.metadataDirective === 'REPLACE';
  const version: ObjectVersionRecord = {
    key: args.key,
    versionId,
    seq,
    lastModified: context.now(),
    size: source.size,
    etag: source.etag,
    contentType: replace ? (args.contentType ?? 'application/octet-stream') : source.contentType,
    metadata: replace ? (args.metadata ?? {}) : source.metadata,
    checksums: source.checksums,
    chunks: Buffer.from(source.chunks),
    storedBytes,
    compressed: source.compressed,
  };
  // Tags follow the source whatever the metadata directive, as S3's tagging directive defaults
  // to COPY, unless the request replaces them.
  const tags = args.tags ?? source.tags;
  if (tags !== undefined && tags.length > 0) version.tags = tags;
  Object.assign(version, locked);
  // The copy keeps the source's ETag, so it keeps the parts that ETag counts.
  if (source.partSizes) version.partSizes = source.partSizes;
  const headers = replace ? args.headers : source.headers;
  if (headers !== undefined && Object.keys(headers).length > 0) version.headers = headers;
  writeVersion(context, { tenant, bucket, version, usage });
  saveUsage(context, usage);
  recordObjectEvent(context, bucket, 'object-created', version);
  return version;
}

/**
 * S3's x-amz-copy-source-if-* (of CopyObject and UploadPartCopy) with RFC 9110's precedence: an ifMatch decides instead of
 * ifUnmodifiedSince, an ifNoneMatch instead of ifModifiedSince. The tags come in a JSON body,
 * so one written without its quotes (`abc` for `"abc"`) is read as quoted.
 */
export function checkSourceConditions(source: ObjectVersionRecord, args: SourceConditions): void {
  const modifiedSeconds = Math.floor(source.lastModified / 1000) * 1000;
  const ifMatch = args.ifMatch === undefined ? undefined : quotedEtags(args.ifMatch);
  const ifNoneMatch = args.ifNoneMatch === undefined ? undefined : quotedEtags(args.ifNoneMatch);
  if (
    ifMatch !== undefined &&
    !(ifMatch === '*' || etagListMatches(ifMatch, source.etag, 'strong'))
  )
    throw PreconditionFailed('copy source If-Match failed');
  if (
    ifMatch === undefined &&
    args.ifUnmodifiedSince !== undefined &&
    modifiedSeconds > args.ifUnmodifiedSince
  )
    throw PreconditionFailed('copy source modified since');
  if (
    ifNoneMatch !== undefined &&
    (ifNoneMatch === '*' || etagListMatches(ifNoneMatch, source.etag))
  ) {
    throw PreconditionFailed('copy source If-None-Match failed');
  }
  if (
    ifNoneMatch === undefined &&
    args.ifModifiedSince !== undefined &&
    modifiedSeconds <= args.ifModifiedSince
  )
    throw PreconditionFailed('copy source not modified since');
}

/** An entity-tag list with every bare tag quoted: `abc, W/"d"` reads `"abc", W/"d"`. */
function quotedEtags(list: string): string {
  if (list.trim() === '*') return '*';
  return list
    .split(',')
    .map((part) => {
      const tag = part.trim();
      return tag.startsWith('"') || tag.startsWith('W/"') ? tag : `"${tag}"`;
    })
    .join(', ');
}
