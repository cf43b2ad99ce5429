// A page of a bucket's versions and delete markers, by key then newest first, decoded: what a
// transport that writes each entry whole needs (S3's ListObjectVersions). Resumes after a key
// marker, or after one version of it (its version id); every version of a key whose latest is
// on the page carries `isLatest`. With a delimiter, the keys that hold it after the prefix are
// rolled up into common prefixes, each counted once against maxKeys and skipped whole (a seek
// past the prefix, never a walk through its versions).

import {
  DB,
  decodeObjectKey,
  prefixRange,
  versionRange,
  type BucketRecord,
  type ObjectVersionRecord,
} from '../engine/index/schema.js';
import type { IndexStore } from '../engine/index/store.js';

export interface VersionsQuery {
  readonly prefix: string;
  readonly maxKeys: number;
  readonly keyMarker?: string | undefined;
  readonly versionIdMarker?: string | undefined;
  readonly delimiter?: string | undefined;
}

export interface VersionsPageResult {
  readonly entries: (ObjectVersionRecord & { readonly isLatest: boolean })[];
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

/** Where the page starts: after every version of keyMarker, or after its marker version. */
function startOf(store: IndexStore, bucket: BucketRecord, query: VersionsQuery): Buffer {
  const range = prefixRange(bucket.id, query.prefix);
  if (query.keyMarker === undefined) return range.start;
  // A marker that is a common prefix (the last page ended on one) resumes past all of it.
  const rolledUp = commonPrefixOf(query.keyMarker, query);
  if (rolledUp !== undefined) {
    const past = prefixRange(bucket.id, rolledUp).end;
    return Buffer.compare(past, range.start) > 0 ? past : range.start;
  }
  const marker = versionRange(bucket.id, query.keyMarker);
  let after = marker.end;
  if (query.versionIdMarker !== undefined) {
    for (const { key } of store.range<ObjectVersionRecord>(DB.versions, marker)) {
      after = Buffer.concat([Buffer.from(key), Buffer.from([0])]);
      const value = store.get<ObjectVersionRecord>(DB.versions, Buffer.from(key));
      if (value?.versionId === query.versionIdMarker) break;
      after = marker.end;
    }
  }
  return Buffer.compare(after, range.start) > 0 ? after : range.start;
}

export function listVersionsPage(
  store: IndexStore,
  bucket: BucketRecord,
  query: VersionsQuery,
): VersionsPageResult {
  const range = prefixRange(bucket.id, query.prefix);
  const entries: (ObjectVersionRecord & { isLatest: boolean })[] = [];
  const commonPrefixes: string[] = [];
  let previousKey: string | undefined;
  let truncated = false;
  /** The marker of the page's last item: a version's key and id, or a common prefix. */
  let last: { key: string; versionId?: string } | undefined;
  let start: Buffer | undefined = startOf(store, bucket, query);
  while (start !== undefined && !truncated) {
    const from: Buffer = start;
    start = undefined;
    for (const { key: raw, value } of store.range<ObjectVersionRecord>(DB.versions, {
      start: from,
      end: range.end,
    })) {
      if (entries.length + commonPrefixes.length >= query.maxKeys) {
        truncated = true;
        break;
      }
      const key = decodeObjectKey(Buffer.from(raw).subarray(0, raw.length - 9));
      const rolledUp = commonPrefixOf(key, query);
      if (rolledUp !== undefined) {
        commonPrefixes.push(rolledUp);
        last = { key: rolledUp };
        start = prefixRange(bucket.id, rolledUp).end;
        break;
      }
      // Newest first within a key: its first entry is the latest, unless the page resumed
      // inside the key (after one of its versions).
      const resumedInside = key === query.keyMarker && query.versionIdMarker !== undefined;
      const isLatest = key !== previousKey && !resumedInside;
      previousKey = key;
      entries.push({ ...value, isLatest });
      last = { key, versionId: value.versionId };
    }
  }
  return {
    entries,
    commonPrefixes,
    isTruncated: truncated,
    nextKeyMarker: truncated ? last?.key : undefined,
    nextVersionIdMarker: truncated ? last?.versionId : undefined,
  };
}
