// Object listings: the rules of a page, whatever the transport writes of it (native JSON, S3
// ListObjects V1 and V2 XML).
//
// A page lists the bucket's current objects whose keys start with `prefix`, in key order, from
// just past `after` (where the previous page ended). With a `delimiter`, the keys that hold it
// after the prefix are rolled up into one common prefix each (up to and including the first
// delimiter), which counts as one entry and is listed once, where its first key would be. A
// page holds at most `maxKeys` entries (objects and common prefixes together); it is truncated
// when an entry is left, and then `last` is where the next page starts after. A page that ended
// at a common prefix resumes past every key under it.
//
// The scan hands each object to the sink as its raw index entry (LMDB's shared buffers, valid
// during the call only): the native writer turns the record's bytes into JSON in place, and
// `decodeListed` gives the record to a writer that wants it whole.

import { decodeValue } from '../format/values.js';
import { DB, objectKey, prefixRange, type BucketRecord } from '../engine/index/schema.js';
import type { ObjectVersionRecord } from '../engine/index/schema.js';
import type { IndexStore, RawEntry } from '../engine/index/store.js';
import { BadRequest } from '../util/errors.js';
import type { ListPosition } from './list-token.js';

/** The most entries a listing page holds (and the default page size). */
export const LIST_KEYS_MAX = 1000;

export interface ObjectListQuery {
  readonly prefix: string;
  readonly delimiter: string;
  /** 1 to LIST_KEYS_MAX. */
  readonly maxKeys: number;
  /** Where the previous page ended (a continuation token's or a marker's position). */
  readonly after?: ListPosition | undefined;
}

/** What receives a page's entries, in order. */
export interface ObjectListSink {
  /** An object, as its raw index entry: copy what outlives the call. */
  object(entry: RawEntry): void;
  commonPrefix(prefix: string): void;
}

export interface ObjectListOutcome {
  readonly truncated: boolean;
  /** Where the page ended: set when it is truncated (a truncated page has an entry). */
  readonly last: ListPosition | undefined;
}

/** The record of a listed entry, decoded (for a writer that wants it whole). */
export function decodeListed(entry: RawEntry): ObjectVersionRecord {
  return decodeValue(entry.valueBytes.subarray(0, entry.valueLength))
    .value as unknown as ObjectVersionRecord;
}

/**
 * A page size given as text: an integer from 1 to `max`; `fallback` when absent. The native
 * listings (`maxKeys`, `maxUploads`, `maxParts`) and S3's (`max-keys`) parse theirs here.
 */
export function parsePageSize(
  text: string | null,
  name: string,
  max: number,
  fallback = max,
): number {
  if (text === null) return fallback;
  if (!/^\d+$/.test(text) || Number(text) < 1 || Number(text) > max)
    throw BadRequest(`${name} must be an integer from 1 to ${max}`);
  return Number(text);
}

/** The index key of the last object listed, copied out of LMDB's buffer for the position. */
let lastKeyBytes = Buffer.alloc(1024);

/** Lists one page of `bucket` into `sink` (see the module comment). */
export function listObjectsPage(
  store: IndexStore,
  bucket: BucketRecord,
  query: ObjectListQuery,
  sink: ObjectListSink,
): ObjectListOutcome {
  const range = prefixRange(bucket.id, query.prefix);
  const { prefix, delimiter, maxKeys, after } = query;
  let start = range.start;
  if (after !== undefined) {
    // After a common prefix, skip everything under it; after a key, resume right behind it.
    const past = Buffer.concat([
      objectKey(bucket.id, after.value),
      Buffer.from([after.kind === 'prefix' ? 0xff : 0]),
    ]);
    if (Buffer.compare(past, start) > 0) start = past;
  }
  let entries = 0;
  let truncated = false;
  let advanced = false;
  /** Set while the page's last entry so far is a common prefix. */
  let lastPrefix: string | undefined;
  let lastKeyLength = 0;
  const visit = (entry: RawEntry): boolean => {
    if (entries >= maxKeys) {
      truncated = true;
      return false;
    }
    if (delimiter) {
      const key = entry.keyBytes.toString('utf8', entry.keyStart + 4, entry.keyEnd);
      const cut = key.indexOf(delimiter, prefix.length);
      if (cut >= 0) {
        const common = key.slice(0, cut + delimiter.length);
        sink.commonPrefix(common);
        entries += 1;
        lastPrefix = common;
        // The scan stops here and starts again past every key under the common prefix.
        start = Buffer.concat([objectKey(bucket.id, common), Buffer.from([0xff])]);
        advanced = true;
        return false;
      }
    }
    sink.object(entry);
    entries += 1;
    const length = entry.keyEnd - entry.keyStart;
    if (length > lastKeyBytes.length) lastKeyBytes = Buffer.alloc(length);
    // A loop: Buffer#copy costs more than these few bytes.
    const keyBytes = entry.keyBytes;
    for (let i = 0, from = entry.keyStart; i < length; i++, from++)
      lastKeyBytes[i] = keyBytes[from] as number;
    lastKeyLength = length;
    lastPrefix = undefined;
    return true;
  };
  while (true) {
    advanced = false;
    store.scanRaw(DB.objects, { start, end: range.end }, visit);
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- visit sets them
    if (!advanced || truncated) break;
  }
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- visit sets it
  if (!truncated) return { truncated, last: undefined };
  const last: ListPosition =
    lastPrefix !== undefined
      ? { kind: 'prefix', value: lastPrefix }
      : { kind: 'key', value: lastKeyBytes.toString('utf8', 4, lastKeyLength) };
  return { truncated, last };
}

/** One entry of `listObjectEntries`. */
export type ListedEntry =
  | { readonly kind: 'object'; readonly version: ObjectVersionRecord }
  | { readonly kind: 'prefix'; readonly prefix: string };

/**
 * A page as decoded entries, for a transport that writes each record whole (S3's XML): the
 * same page as `listObjectsPage`.
 */
export function listObjectEntries(
  store: IndexStore,
  bucket: BucketRecord,
  query: ObjectListQuery,
): { entries: ListedEntry[]; outcome: ObjectListOutcome } {
  const entries: ListedEntry[] = [];
  const outcome = listObjectsPage(store, bucket, query, {
    object: (entry) => entries.push({ kind: 'object', version: decodeListed(entry) }),
    commonPrefix: (prefix) => entries.push({ kind: 'prefix', prefix }),
  });
  return { entries, outcome };
}
