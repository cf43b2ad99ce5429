// Versions listings on a cluster member (docs/cluster.md §8a, "Listings"): a page of a bucket's
// versions (S3's ListObjectVersions, the native versions listing) is merged from a majority of
// the bucket's replicas, since a replica that was down lacks the versions written meanwhile and a
// catch-up copies only a key's current version.
//
// - Every answering replica (this node too, when it is one) lists its own page of the query: at
//   most `maxKeys` items (versions, and common prefixes under a delimiter) from the markers on.
// - The pages are merged: one entry per (key, version id), the newest sequence winning (a null
//   version overwritten while a replica was down), common prefixes once, in listing order; the
//   first `maxKeys` items are the page. An item on the merged page has no more items before it on
//   any replica than on the merge, so each replica's page holds every item of the merged page it
//   holds: pages are complete. The page is truncated when the merge had more, or when any replica
//   had more.
// - An entry that some answering replica lacks is either one it missed or one it deleted (a
//   version deleted by id, or an unversioned key deleted or overwritten): those replicas are asked
//   whether they hold a newer delete of it (`versionsGone`: a tombstone of the key, or of that
//   version), and it is dropped if one does. A write and a delete acknowledged by majorities meet
//   in every majority, so an acknowledged delete is always seen.
// - `isLatest`: the first entry of a key on the page, unless the page resumed inside the marker
//   key; there, the entry whose sequence is the newest any replica holds of that key.
// - Markers are a key and a version id (a sequence), the same on every replica: a page goes on
//   on any node. Entries travel without their chunk references.

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
import type { LocalEngine } from '../engine/command-router.js';
import { findVersionIn, seqOfVersionId } from '../engine/ops/objects.js';
import { BadRequest } from '../util/errors.js';
import type { DataHandler } from './data-transport.js';
import { HEAD_MS_MAX, majorityOf, type Replicator } from './replication.js';

/** The most items one page holds (the largest page of either API). */
export const VERSIONS_MERGE_MAX = 1000;
const PAGE_PATH = '/cluster/v1/data/versions';
const GONE_PATH = '/cluster/v1/data/versions-gone';
const NO_CHUNKS = Buffer.alloc(0);

export interface VersionsQuery {
  readonly tenantId: string;
  readonly bucket: string;
  readonly prefix: string;
  readonly delimiter?: string;
  readonly keyMarker?: string;
  readonly versionIdMarker?: string;
  readonly maxKeys: number;
}

type Entry = ObjectVersionRecord & { isLatest: boolean };

/** One replica's page: its items in listing order, and the newest sequence of the marker key. */
export interface ReplicaPage {
  readonly items: Array<{ entry: ObjectVersionRecord } | { prefix: string }>;
  readonly truncated: boolean;
  readonly markerNewest: number;
}

export interface MergedPage {
  entries: Entry[];
  commonPrefixes: string[];
  isTruncated: boolean;
  nextKeyMarker?: string;
  nextVersionIdMarker?: string;
}

export class VersionsLister {
  constructor(
    private readonly replicator: Replicator,
    private readonly local: LocalEngine,
  ) {}

  handlers(): Map<string, DataHandler> {
    return new Map<string, DataHandler>([
      [PAGE_PATH, (_from, body) => Promise.resolve(this.pageHere(parseQuery(body)))],
      [GONE_PATH, (_from, body) => Promise.resolve(this.goneHere(body))],
    ]);
  }

  /** The page merged from a majority of the bucket's replicas (see the header). */
  async list(body: Record<string, unknown>): Promise<MergedPage> {
    const query = parseQuery(body);
    const { replicator } = this;
    const { bucket } = replicator.bucketOf({ ...query });
    const replicas = replicator.replicaIds(bucket);
    const self = replicator.nodeId;
    const selfCounts = replicas.includes(self);
    const needed = majorityOf(replicas.length) - (selfCounts ? 1 : 0);
    const others = replicas.filter((id) => id !== self);
    const answers =
      others.length === 0
        ? new Map<string, Record<string, unknown>>()
        : await replicator.gather(others, needed, (address) =>
            replicator.call(address, 'versions', { ...query }, HEAD_MS_MAX),
          );
    const pages = new Map<string | null, ReplicaPage>();
    // A node that is no replica (a coordinator only) may hold copies its reads fetched: stale.
    if (selfCounts || answers.size === 0) pages.set(null, this.pageHere(query));
    for (const [address, answer] of answers) pages.set(address, answer as unknown as ReplicaPage);
    const merged = mergePages([...pages.values()], query);
    const lacking = new Map<
      string | null,
      Array<{ key: string; versionId: string; seq: number }>
    >();
    for (const [address, page] of pages) {
      const held = new Set(page.items.map((item) => ('entry' in item ? idOf(item.entry) : '')));
      const missing = merged.entries
        .filter((entry) => !held.has(idOf(entry)))
        .map((entry) => ({ key: entry.key, versionId: entry.versionId, seq: entry.seq }));
      if (missing.length > 0) lacking.set(address, missing);
    }
    if (lacking.size === 0) return merged;
    const gone = new Set<string>();
    for (const [address, entries] of lacking) {
      const answer =
        address === null
          ? this.goneHere({ ...query, entries })
          : await replicator.call(address, 'versions-gone', { ...query, entries }, HEAD_MS_MAX);
      for (const [index, isGone] of (answer['gone'] as boolean[]).entries())
        if (isGone) gone.add(idOf(entries[index] as { key: string; versionId: string }));
    }
    // Dropping entries shortens the page; the next page goes on from its last item.
    return gone.size === 0 ? merged : mergePages([...pages.values()], query, gone);
  }

  /** This node's own page of the query. */
  private pageHere(query: VersionsQuery): ReplicaPage {
    const { bucket } = this.replicator.bucketOf({ ...query });
    this.local.store.refresh();
    return replicaPage(this.local.store, bucket, query);
  }

  /** For each entry, whether this node holds a delete of it newer than it. */
  private goneHere(body: Record<string, unknown>): Record<string, unknown> {
    const { bucket } = this.replicator.bucketOf(body);
    const entries = body['entries'];
    if (!Array.isArray(entries) || entries.length > VERSIONS_MERGE_MAX)
      throw BadRequest(`versions-gone takes at most ${VERSIONS_MERGE_MAX} entries`);
    this.local.store.refresh();
    return {
      gone: (entries as unknown[]).map((item) => {
        const { key, versionId, seq } = (item ?? {}) as Record<string, unknown>;
        if (typeof key !== 'string' || typeof versionId !== 'string' || typeof seq !== 'number')
          throw BadRequest('versions-gone entries are {key, versionId, seq}');
        return this.replicator.deletedSince(bucket, key, versionId) > seq;
      }),
    };
  }
}

function idOf(entry: { key: string; versionId: string }): string {
  return `${entry.versionId}/${entry.key}`;
}

/** The common prefix `key` rolls up into under the query's delimiter, if any. */
function commonPrefixOf(key: string, query: VersionsQuery): string | undefined {
  const { delimiter } = query;
  if (delimiter === undefined || delimiter === '') return undefined;
  const at = key.indexOf(delimiter, query.prefix.length);
  return at === -1 ? undefined : key.slice(0, at + delimiter.length);
}

/** Where a page starts in `versions`: past the markers (as service/versions.ts resumes). */
function startOf(store: IndexStore, bucket: BucketRecord, query: VersionsQuery): Buffer {
  const range = prefixRange(bucket.id, query.prefix);
  const { keyMarker, versionIdMarker } = query;
  let start = range.start;
  if (keyMarker !== undefined) {
    const rolled = commonPrefixOf(keyMarker, query);
    if (rolled !== undefined) start = prefixRange(bucket.id, rolled).end;
    else if (versionIdMarker === undefined) start = versionRange(bucket.id, keyMarker).end;
    else {
      const seq =
        findVersionIn(store, bucket.id, keyMarker, versionIdMarker)?.seq ??
        seqOfVersionId(versionIdMarker);
      start =
        seq === undefined
          ? versionRange(bucket.id, keyMarker).start
          : Buffer.concat([versionKey(bucket.id, keyMarker, seq), Buffer.from([0])]);
    }
  }
  return Buffer.compare(start, range.start) > 0 ? start : range.start;
}

/** A replica's page of the query from `store` (see the header). */
export function replicaPage(
  store: IndexStore,
  bucket: BucketRecord,
  query: VersionsQuery,
): ReplicaPage {
  const end = prefixRange(bucket.id, query.prefix).end;
  const items: ReplicaPage['items'] = [];
  let start = startOf(store, bucket, query);
  let truncated = false;
  for (let restart = true; restart && !truncated;) {
    restart = false;
    for (const { key: raw, value } of store.range<ObjectVersionRecord>(DB.versions, {
      start,
      end,
    })) {
      if (items.length >= query.maxKeys) {
        truncated = true;
        break;
      }
      const rolled = commonPrefixOf(decodeObjectKey(raw.subarray(0, raw.length - 9)), query);
      if (rolled !== undefined) {
        items.push({ prefix: rolled });
        start = prefixRange(bucket.id, rolled).end;
        restart = true;
        break;
      }
      items.push({ entry: { ...value, chunks: NO_CHUNKS } });
    }
  }
  let markerNewest = 0;
  if (query.keyMarker !== undefined)
    for (const { value } of store.range<ObjectVersionRecord>(DB.versions, {
      ...versionRange(bucket.id, query.keyMarker),
      limit: 1,
    }))
      markerNewest = value.seq;
  return { items, truncated, markerNewest };
}

/** Listing order: by key, then newest first; a common prefix sorts as its text. */
function orderOf(item: { entry: ObjectVersionRecord } | { prefix: string }): [string, number] {
  return 'entry' in item ? [item.entry.key, -item.entry.seq] : [item.prefix, 0];
}

/** The merged page of `pages` (see the header), without the entries `gone` names. */
export function mergePages(
  pages: readonly ReplicaPage[],
  query: VersionsQuery,
  gone: ReadonlySet<string> = new Set(),
): MergedPage {
  const entries = new Map<string, ObjectVersionRecord>();
  const prefixes = new Set<string>();
  for (const page of pages)
    for (const item of page.items) {
      if ('prefix' in item) prefixes.add(item.prefix);
      else if (!gone.has(idOf(item.entry))) {
        const held = entries.get(idOf(item.entry));
        if (held === undefined || held.seq < item.entry.seq)
          entries.set(idOf(item.entry), item.entry);
      }
    }
  const items = [
    ...[...entries.values()].map((entry) => ({ entry })),
    ...[...prefixes].map((prefix) => ({ prefix })),
  ].sort((a, b) => {
    const [ka, sa] = orderOf(a);
    const [kb, sb] = orderOf(b);
    // Bytewise, as the index orders keys (UTF-16 order differs past U+FFFF).
    return Buffer.compare(Buffer.from(ka), Buffer.from(kb)) || sa - sb;
  });
  const page = items.slice(0, query.maxKeys);
  const markerNewest = Math.max(0, ...pages.map((replica) => replica.markerNewest));
  const result: MergedPage = {
    entries: [],
    commonPrefixes: [],
    isTruncated: items.length > query.maxKeys || pages.some((replica) => replica.truncated),
  };
  let previousKey: string | undefined;
  for (const item of page) {
    if ('prefix' in item) {
      result.commonPrefixes.push(item.prefix);
      continue;
    }
    const { entry } = item;
    const resumedInside = entry.key === query.keyMarker && query.versionIdMarker !== undefined;
    const isLatest = resumedInside ? entry.seq >= markerNewest : entry.key !== previousKey;
    previousKey = entry.key;
    result.entries.push({ ...entry, isLatest });
  }
  const last = page[page.length - 1];
  if (result.isTruncated && last !== undefined) {
    result.nextKeyMarker = 'prefix' in last ? last.prefix : last.entry.key;
    if ('entry' in last) result.nextVersionIdMarker = last.entry.versionId;
  }
  return result;
}

function parseQuery(body: Record<string, unknown>): VersionsQuery {
  const { tenantId, bucket, prefix, delimiter, keyMarker, versionIdMarker, maxKeys } = body;
  const optional = (value: unknown): boolean => value === undefined || typeof value === 'string';
  if (
    typeof tenantId !== 'string' ||
    typeof bucket !== 'string' ||
    typeof prefix !== 'string' ||
    !optional(delimiter) ||
    !optional(keyMarker) ||
    !optional(versionIdMarker) ||
    typeof maxKeys !== 'number' ||
    !Number.isSafeInteger(maxKeys) ||
    maxKeys < 1 ||
    maxKeys > VERSIONS_MERGE_MAX
  )
    throw BadRequest(
      'a versions page is {tenantId, bucket, prefix, delimiter?, keyMarker?, versionIdMarker?, ' +
        `maxKeys of 1 to ${VERSIONS_MERGE_MAX}}`,
    );
  if (versionIdMarker !== undefined && keyMarker === undefined)
    throw BadRequest('versionIdMarker needs the keyMarker it belongs to');
  return {
    tenantId,
    bucket,
    prefix,
    maxKeys,
    ...(delimiter === undefined ? {} : { delimiter: delimiter as string }),
    ...(keyMarker === undefined ? {} : { keyMarker: keyMarker as string }),
    ...(versionIdMarker === undefined ? {} : { versionIdMarker: versionIdMarker as string }),
  };
}
