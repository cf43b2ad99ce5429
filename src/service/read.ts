// Reads: which version a read resolves to, its preconditions, and the range it serves. Every
// transport that reads an object (the native GET and HEAD, the signed GET, S3's GetObject and
// HeadObject, a copy's source) asks here, so they answer the same.
//
// - A key without a version id resolves to its current version. When there is none and the
//   key's latest version is a delete marker, the 404 says so (its details carry the marker's
//   version id, which the error table turns into the delete-marker headers), as on S3.
// - A version id that names a delete marker is not a thing to read: 405 with `Allow: DELETE`.
// - Preconditions follow RFC 9110 §13.2.2; If-Range §13.1.5; Range parseRange (download.ts).

import {
  DB,
  objectKey,
  versionRange,
  type BucketRecord,
  type ObjectVersionRecord,
} from '../engine/index/schema.js';
import type { IndexStore } from '../engine/index/store.js';
import { deleteMarkerNamed, etagListMatches, findVersionIn } from '../engine/ops/objects.js';
import { BadRequest, InvalidRange, NotFound, PreconditionFailed } from '../util/errors.js';
import { parseRange, type ByteRange } from './download.js';

/** The conditional and range fields of a read, as the client sent them (absent: not sent). */
export interface ReadConditions {
  readonly ifMatch?: string | undefined;
  readonly ifNoneMatch?: string | undefined;
  readonly ifModifiedSince?: string | undefined;
  readonly ifUnmodifiedSince?: string | undefined;
  readonly ifRange?: string | undefined;
  /** The Range header's value (`bytes=0-99`). */
  readonly range?: string | undefined;
}

/** The version to read of `key`: the current one, or the one `versionId` names (null: none). */
export function resolveForRead(
  store: IndexStore,
  bucket: BucketRecord,
  key: string,
  versionId: string | null,
): ObjectVersionRecord {
  const version =
    versionId === null
      ? store.get<ObjectVersionRecord>(DB.objects, objectKey(bucket.id, key))
      : findVersionIn(store, bucket.id, key, versionId);
  if (version?.deleteMarker && versionId !== null) throw deleteMarkerNamed(version, 'DELETE');
  if (!version || version.deleteMarker) {
    const marker = versionId === null ? latestDeleteMarkerIn(store, bucket, key) : undefined;
    throw NotFound(
      `object ${key} not found`,
      marker ? { deleteMarkerVersionId: marker.versionId } : {},
    );
  }
  return version;
}

/**
 * Whether `key` has a current entry (a version, or a delete marker that is the latest): a
 * write whose If-Match failed with none there failed for want of an object, which S3 answers
 * as 404 `NoSuchKey` rather than 412.
 */
export function hasCurrentEntry(store: IndexStore, bucket: BucketRecord, key: string): boolean {
  return store.has(DB.objects, objectKey(bucket.id, key));
}

/**
 * The version whose tags, retention or legal hold a read asks for: as `resolveForRead`, but a
 * delete marker named by its id has none of them (405 allowing nothing, as the engine's
 * `targetVersion` answers a write of them), and a missing key is a plain 404.
 */
export function resolveForAttributes(
  store: IndexStore,
  bucket: BucketRecord,
  key: string,
  versionId: string | null,
): ObjectVersionRecord {
  const version =
    versionId === null
      ? store.get<ObjectVersionRecord>(DB.objects, objectKey(bucket.id, key))
      : findVersionIn(store, bucket.id, key, versionId);
  if (version?.deleteMarker && versionId !== null) throw deleteMarkerNamed(version, '');
  if (!version || version.deleteMarker) throw NotFound(`object ${key} not found`);
  return version;
}

/** The key's latest version when it is a delete marker (a bucket that has had versioning). */
export function latestDeleteMarkerIn(
  store: IndexStore,
  bucket: BucketRecord,
  key: string,
): ObjectVersionRecord | undefined {
  if (bucket.versioning === 'Unversioned') return undefined;
  for (const { value } of store.range<ObjectVersionRecord>(DB.versions, {
    ...versionRange(bucket.id, key),
    limit: 1,
  }))
    return value.deleteMarker ? value : undefined;
  return undefined;
}

/**
 * The preconditions of a read, in the order of RFC 9110 §13.2.2: If-Match, else
 * If-Unmodified-Since, refuse with 412 (thrown); If-None-Match, else If-Modified-Since, answer
 * 304 (returned). If-Match compares strongly (a weak tag never matches), If-None-Match weakly; a
 * date that is not an HTTP-date is ignored, as the RFC says.
 */
export function checkReadConditions(
  conditions: ReadConditions,
  version: ObjectVersionRecord,
): 304 | undefined {
  const lastModifiedSecond = Math.floor(version.lastModified / 1000) * 1000;
  const { ifMatch, ifNoneMatch } = conditions;
  if (ifMatch !== undefined) {
    if (!(ifMatch.trim() === '*' || etagListMatches(ifMatch, version.etag, 'strong')))
      throw PreconditionFailed('If-Match: the object does not match');
  } else {
    const unmodifiedSince = parseHttpDate(conditions.ifUnmodifiedSince);
    if (!Number.isNaN(unmodifiedSince) && lastModifiedSecond > unmodifiedSince)
      throw PreconditionFailed('If-Unmodified-Since: the object was modified since');
  }
  if (ifNoneMatch !== undefined) {
    const matches = ifNoneMatch.trim() === '*' || etagListMatches(ifNoneMatch, version.etag);
    return matches ? 304 : undefined;
  }
  const modifiedSince = parseHttpDate(conditions.ifModifiedSince);
  if (!Number.isNaN(modifiedSince) && lastModifiedSecond <= modifiedSince) return 304;
  return undefined;
}

/**
 * The range to serve, if any (see parseRange). RFC 9110 §13.1.5: with an If-Range that is not
 * a strong match of the ETag, nor the exact Last-Modified date, the whole object is served.
 */
export function rangeToServe(
  conditions: ReadConditions,
  version: ObjectVersionRecord,
): ByteRange | undefined {
  const ifRange = conditions.ifRange?.trim();
  if (ifRange !== undefined) {
    const current =
      ifRange.startsWith('"') || ifRange.startsWith('W/')
        ? ifRange === version.etag
        : parseHttpDate(ifRange) === Math.floor(version.lastModified / 1000) * 1000;
    if (!current) return undefined;
  }
  return parseRange(conditions.range, version.size);
}

/** RFC 9110 §5.6.7: IMF-fixdate, and the obsolete RFC 850 and asctime forms (all in GMT). */
const HTTP_DATE =
  /^(?:[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT|[A-Z][a-z]{5,8}, \d{2}-[A-Z][a-z]{2}-\d{2} \d{2}:\d{2}:\d{2} GMT|[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4})$/;

/** Milliseconds of an HTTP-date; NaN for anything else (`Date.parse` alone takes "2024"). */
export function parseHttpDate(value: string | undefined): number {
  const text = value?.trim() ?? '';
  if (!HTTP_DATE.test(text)) return NaN;
  return Date.parse(text.endsWith('GMT') ? text : `${text} GMT`);
}

/**
 * A page of a version's parts (S3's GetObjectAttributes `ObjectParts`): the parts after part
 * `marker`, at most `max`; undefined for a version not uploaded in parts. Only sizes are kept
 * per part once an upload completes.
 */
export function versionPartsPage(
  version: ObjectVersionRecord,
  page: { marker: number; max: number },
):
  | {
      total: number;
      parts: { partNumber: number; size: number; checksums?: Record<string, string> }[];
      isTruncated: boolean;
    }
  | undefined {
  const sizes = version.partSizes;
  if (sizes === undefined) return undefined;
  const sums = version.partChecksums;
  const parts = sizes.slice(page.marker, page.marker + page.max).map((size, index) => {
    const partNumber = page.marker + index + 1;
    const value = sums?.values[partNumber - 1];
    return sums && value !== undefined
      ? { partNumber, size, checksums: { [sums.alg]: value } }
      : { partNumber, size };
  });
  return { total: sizes.length, parts, isTruncated: page.marker + page.max < sizes.length };
}

/**
 * The bytes of part `partNumber` of a version (S3's GetObject and HeadObject `partNumber`): a
 * part of the completed multipart upload it came from, or the whole of any other version as its
 * one part. Answers the range (undefined: the whole version) and the version's part count
 * (undefined when it was not uploaded in parts). A part it does not have is `bad_request` with
 * the reason `part_missing`.
 */
export function partToServe(
  version: ObjectVersionRecord,
  partNumber: number,
): { range: ByteRange | undefined; partsCount: number | undefined } {
  const sizes = version.partSizes;
  if (sizes === undefined) {
    if (partNumber !== 1)
      throw BadRequest(`the object has one part, not ${partNumber}`, { reason: 'part_missing' });
    return { range: undefined, partsCount: undefined };
  }
  const size = sizes[partNumber - 1];
  if (size === undefined)
    throw BadRequest(`the object has ${sizes.length} parts, not ${partNumber}`, {
      reason: 'part_missing',
    });
  let start = 0;
  for (let index = 0; index < partNumber - 1; index += 1) start += sizes[index] as number;
  if (size === 0) {
    // An empty part (only ever the last) has no byte range to name.
    if (version.size === 0) return { range: undefined, partsCount: sizes.length };
    throw InvalidRange(`part ${partNumber} is empty`, { size: version.size });
  }
  return { range: { start, end: start + size - 1 }, partsCount: sizes.length };
}
