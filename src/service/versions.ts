// A page of a bucket's versions and delete markers, by key then newest first, decoded: what a
// transport that writes each entry whole needs (S3's ListObjectVersions). Resumes after a key
// marker, or after one version of it (its version id); every version of a key whose latest is
// on the page carries `isLatest`.

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
}

export interface VersionsPageResult {
  readonly entries: (ObjectVersionRecord & { readonly isLatest: boolean })[];
  readonly isTruncated: boolean;
  readonly nextKeyMarker?: string | undefined;
  readonly nextVersionIdMarker?: string | undefined;
}

/** Where the page starts: after every version of keyMarker, or after its marker version. */
function startOf(store: IndexStore, bucket: BucketRecord, query: VersionsQuery): Buffer {
  const range = prefixRange(bucket.id, query.prefix);
  if (query.keyMarker === undefined) return range.start;
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
  let previousKey: string | undefined;
  let truncated = false;
  const start = startOf(store, bucket, query);
  for (const { key: raw, value } of store.range<ObjectVersionRecord>(DB.versions, {
    start,
    end: range.end,
  })) {
    if (entries.length >= query.maxKeys) {
      truncated = true;
      break;
    }
    const key = decodeObjectKey(Buffer.from(raw).subarray(0, raw.length - 9));
    // Newest first within a key: its first entry is the latest, unless the page resumed inside
    // the key (after one of its versions).
    const resumedInside = key === query.keyMarker && query.versionIdMarker !== undefined;
    const isLatest = key !== previousKey && !resumedInside;
    previousKey = key;
    entries.push({ ...value, isLatest });
  }
  const last = entries[entries.length - 1];
  return {
    entries,
    isTruncated: truncated,
    nextKeyMarker: truncated ? last?.key : undefined,
    nextVersionIdMarker: truncated ? last?.versionId : undefined,
  };
}
