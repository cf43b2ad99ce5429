// A bucket's versions and delete markers, by key then newest first: one iterator that every
// transport's versions listing pages through (the native JSON `listObjectVersions`, S3's
// ListObjectVersions XML). Entries are decoded records, each with `isLatest`. With a delimiter
// (S3's), the keys that hold it after the prefix are rolled up into common prefixes, each
// counted once against maxKeys and skipped whole (a seek past the prefix, never a walk through
// its versions); a key marker that is a common prefix resumes past all of it.
//
// A page resumes after a key marker (every version of that key), or after one version of it
// (its version id). The marker version may have been deleted since the previous page, or never
// have been a version of that key: its id still places it (ids are sequence numbers), so the
// page goes on where that version would be. Only the newest version of the marker's key is the
// latest, wherever the page resumes. A `null` marker whose null version is gone leaves no place:
// the key is listed again from its newest version (a repeat, never a version skipped).

import {
  DB,
  decodeObjectKey,
  prefixRange,
  versionKey,
  versionRange,
  type BucketRecord,
  type ObjectVersionRecord,
} from '../engine/index/schema.js';
import type { IndexStore } from '../engine/index/store.js';
import { findVersionIn, seqOfVersionId } from '../engine/ops/objects.js';
import { BadRequest } from '../util/errors.js';

/** The most entries a versions page holds (and the default page size). */
export const VERSIONS_PAGE_MAX = 1000;

export interface VersionsPosition {
  readonly prefix: string;
  readonly keyMarker?: string | undefined;
  /** Needs `keyMarker`; empty is absent, as every other list parameter. */
  readonly versionIdMarker?: string | undefined;
}

export interface VersionsQuery extends VersionsPosition {
  readonly delimiter?: string | undefined;
  /** 1 to VERSIONS_PAGE_MAX. */
  readonly maxKeys: number;
}

export type VersionEntry = ObjectVersionRecord & { readonly isLatest: boolean };

export interface VersionsPageResult {
  readonly entries: VersionEntry[];
  readonly isTruncated: boolean;
  readonly nextKeyMarker?: string | undefined;
  readonly nextVersionIdMarker?: string | undefined;
  /** The common prefixes on the page, in key order (a delimiter only). */
  readonly commonPrefixes: string[];
}

/** The common prefix `key` rolls up into under `query`'s delimiter, if any. */
function commonPrefixOf(key: string, query: VersionsQuery): string | undefined {
  const { delimiter } = query;
  if (delimiter === undefined || delimiter === '') return undefined;
  const at = key.indexOf(delimiter, query.prefix.length);
  return at === -1 ? undefined : key.slice(0, at + delimiter.length);
}

/** The versions under `position.prefix` from just past the markers, in listing order. */
export function* versionEntries(
  store: IndexStore,
  bucket: BucketRecord,
  position: VersionsPosition,
  from?: Buffer,
): Generator<VersionEntry> {
  const keyMarker = position.keyMarker;
  const versionIdMarker = position.versionIdMarker || undefined;
  if (versionIdMarker !== undefined && keyMarker === undefined)
    throw BadRequest('versionIdMarker needs the keyMarker it belongs to');
  const range = prefixRange(bucket.id, position.prefix);
  const resume =
    keyMarker === undefined ? undefined : resumeAt(store, bucket, keyMarker, versionIdMarker);
  let start = resume && Buffer.compare(resume.after, range.start) > 0 ? resume.after : range.start;
  if (from !== undefined && Buffer.compare(from, start) > 0) start = from;
  let previousKey: string | undefined;
  for (const { key: raw, value } of store.range<ObjectVersionRecord>(DB.versions, {
    start,
    end: range.end,
  })) {
    const key = decodeObjectKey(raw.subarray(0, raw.length - 9));
    // Newest first within a key: its first entry is the latest, unless the page resumed inside
    // the key, where only the key's newest version is.
    const isLatest =
      key !== previousKey &&
      (key !== keyMarker || versionIdMarker === undefined || value.seq === resume?.newestSeq);
    previousKey = key;
    yield { ...value, isLatest };
  }
}

/**
 * One page of at most `query.maxKeys` entries and common prefixes, with the markers of the next
 * (the last item's key and version id, or the last common prefix).
 */
export function listVersionsPage(
  store: IndexStore,
  bucket: BucketRecord,
  query: VersionsQuery,
): VersionsPageResult {
  const entries: VersionEntry[] = [];
  const commonPrefixes: string[] = [];
  let truncated = false;
  let last: { key: string; versionId?: string } | undefined;
  // A marker that is a common prefix (the last page ended on one) resumes past all of it.
  const markerPrefix =
    query.keyMarker === undefined ? undefined : commonPrefixOf(query.keyMarker, query);
  let position: VersionsPosition = markerPrefix === undefined ? query : { prefix: query.prefix };
  let from = markerPrefix === undefined ? undefined : prefixRange(bucket.id, markerPrefix).end;
  for (let restart = true; restart && !truncated;) {
    restart = false;
    for (const entry of versionEntries(store, bucket, position, from)) {
      if (entries.length + commonPrefixes.length >= query.maxKeys) {
        truncated = true;
        break;
      }
      const rolledUp = commonPrefixOf(entry.key, query);
      if (rolledUp !== undefined) {
        commonPrefixes.push(rolledUp);
        last = { key: rolledUp };
        position = { prefix: query.prefix };
        from = prefixRange(bucket.id, rolledUp).end;
        restart = true;
        break;
      }
      entries.push(entry);
      last = { key: entry.key, versionId: entry.versionId };
    }
  }
  if (!truncated || last === undefined) return { entries, commonPrefixes, isTruncated: truncated };
  return {
    entries,
    commonPrefixes,
    isTruncated: true,
    nextKeyMarker: last.key,
    nextVersionIdMarker: last.versionId,
  };
}

/**
 * Where a page resumes (see the module comment): after the marker version of `keyMarker`, or
 * after the whole key without a version id marker; with one, also the seq of the key's newest
 * version.
 */
function resumeAt(
  store: IndexStore,
  bucket: BucketRecord,
  keyMarker: string,
  versionIdMarker: string | undefined,
): { after: Buffer; newestSeq?: number } {
  const markerRange = versionRange(bucket.id, keyMarker);
  if (versionIdMarker === undefined) return { after: markerRange.end };
  const marker = findVersionIn(store, bucket.id, keyMarker, versionIdMarker);
  const seq = marker?.seq ?? seqOfVersionId(versionIdMarker);
  let after = markerRange.start;
  if (seq !== undefined) {
    after = Buffer.concat([versionKey(bucket.id, keyMarker, seq), Buffer.from([0])]);
  } else if (versionIdMarker !== 'null') {
    throw BadRequest('malformed versionIdMarker: a versionId, or null');
  }
  for (const { value } of store.range<ObjectVersionRecord>(DB.versions, {
    ...markerRange,
    limit: 1,
  })) {
    return { after, newestSeq: value.seq };
  }
  return { after };
}
