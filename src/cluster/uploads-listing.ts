// Multipart listings on a cluster member (docs/cluster.md §8a, "Listings"): a page of a bucket's
// uploads in progress (S3's ListMultipartUploads, the native uploads listing) and a page of an
// upload's parts (ListParts) are merged from a majority of the bucket's replicas, since a replica
// that was down missed the uploads created, the parts sent and the uploads ended meanwhile.
//
// - Every answering replica (this node too, when it is one) lists its own page: at most `max`
//   uploads after the markers (key, then upload id), or `max` parts after the part marker.
// - Uploads merge by upload id, parts by part number (the newest `lastModified` wins: a part sent
//   again); the first `max` are the page, truncated when the merge had more or a replica did. As
//   for versions (versions-listing.ts), each replica's page holds every item of the merged page
//   that it holds, so pages are complete.
// - An upload that some answering replica lacks was either created while it was down or ended
//   (completed, aborted) on it: each replica that ended one keeps a tombstone of its id
//   (replication.ts `endUpload`), those replicas are asked, and an ended upload is dropped (its
//   parts listing is 404, as on a single node). Majorities meet, so an acknowledged end is seen.
// - A parts listing answers the upload's record too, from any replica that holds it, so a node
//   that missed the create still lists the upload's parts.

import {
  DB,
  multipartPartRange,
  multipartUploadKey,
  objectKey,
  prefixRange,
  type MultipartPartRecord,
  type MultipartUploadRecord,
} from '../engine/index/schema.js';
import type { IndexStore } from '../engine/index/store.js';
import type { LocalEngine } from '../engine/command-router.js';
import { isUploadId, partView, type PartView } from '../engine/ops/multipart.js';
import { BadRequest } from '../util/errors.js';
import type { DataHandler } from './data-transport.js';
import { HEAD_MS_MAX, majorityOf, type Replicator } from './replication.js';

/** The most uploads or parts one page holds. */
export const MULTIPART_MERGE_MAX = 1000;

export interface UploadsQuery {
  readonly tenantId: string;
  readonly bucket: string;
  readonly prefix: string;
  readonly keyMarker?: string;
  readonly uploadIdMarker?: string;
  readonly max: number;
}

export interface PartsQuery {
  readonly tenantId: string;
  readonly bucket: string;
  readonly key: string;
  readonly uploadId: string;
  /** Parts after this number (0: from the first). */
  readonly marker: number;
  readonly max: number;
}

interface Page<T> {
  readonly items: T[];
  readonly truncated: boolean;
}

interface PartsPage extends Page<PartView> {
  readonly upload?: MultipartUploadRecord;
}

export class UploadsLister {
  constructor(
    private readonly replicator: Replicator,
    private readonly local: LocalEngine,
  ) {}

  handlers(): Map<string, DataHandler> {
    return new Map<string, DataHandler>([
      [
        '/cluster/v1/data/uploads',
        (_f, body) => Promise.resolve(this.uploadsHere(uploadsOf(body))),
      ],
      ['/cluster/v1/data/parts', (_f, body) => Promise.resolve(this.partsHere(partsOf(body)))],
      ['/cluster/v1/data/uploads-ended', (_f, body) => Promise.resolve(this.endedHere(body))],
    ]);
  }

  /** A page of uploads in progress, merged from a majority of the replicas (see the header). */
  async uploads(body: Record<string, unknown>): Promise<{
    uploads: MultipartUploadRecord[];
    isTruncated: boolean;
  }> {
    const query = uploadsOf(body);
    const pages = await this.gather(query, 'uploads', () => this.uploadsHere(query));
    const merged = new Map<string, MultipartUploadRecord>();
    for (const page of pages.values())
      for (const upload of page.items) merged.set(upload.uploadId, upload);
    const ended = await this.ended(query, pages, [...merged.keys()]);
    const sorted = [...merged.values()]
      .filter((upload) => !ended.has(upload.uploadId))
      .sort(
        (a, b) =>
          Buffer.compare(Buffer.from(a.key), Buffer.from(b.key)) ||
          (a.uploadId < b.uploadId ? -1 : a.uploadId > b.uploadId ? 1 : 0),
      );
    return {
      uploads: sorted.slice(0, query.max),
      isTruncated: sorted.length > query.max || [...pages.values()].some((page) => page.truncated),
    };
  }

  /**
   * A page of an upload's parts merged from a majority of the replicas, with the upload's record
   * (none when no replica holds it, or one ended it).
   */
  async parts(body: Record<string, unknown>): Promise<{
    upload: MultipartUploadRecord | null;
    parts: PartView[];
    isTruncated: boolean;
  }> {
    const query = partsOf(body);
    const pages = await this.gather(query, 'parts', () => this.partsHere(query));
    const upload = [...pages.values()].find((page) => page.upload !== undefined)?.upload;
    const ended = await this.ended(query, pages, upload === undefined ? [] : [upload.uploadId]);
    if (upload === undefined || ended.size > 0)
      return { upload: null, parts: [], isTruncated: false };
    const merged = new Map<number, PartView>();
    for (const page of pages.values())
      for (const part of page.items) {
        const held = merged.get(part.partNumber);
        if (held === undefined || held.lastModified < part.lastModified)
          merged.set(part.partNumber, part);
      }
    const sorted = [...merged.values()].sort((a, b) => a.partNumber - b.partNumber);
    return {
      upload,
      parts: sorted.slice(0, query.max),
      isTruncated: sorted.length > query.max || [...pages.values()].some((page) => page.truncated),
    };
  }

  /** This node's page (when it is a replica) and those of a majority of the others. */
  private async gather<P>(
    query: { tenantId: string; bucket: string },
    name: string,
    here: () => P,
  ): Promise<Map<string | null, P>> {
    const { replicator } = this;
    const { bucket } = replicator.bucketOf({ ...query });
    const replicas = replicator.replicaIds(bucket);
    const self = replicator.nodeId;
    const selfCounts = replicas.includes(self);
    const others = replicas.filter((id) => id !== self);
    const needed = majorityOf(replicas.length) - (selfCounts ? 1 : 0);
    const answers =
      others.length === 0
        ? new Map<string, Record<string, unknown>>()
        : await replicator.gather(others, needed, (address) =>
            replicator.call(address, name, { ...query }, HEAD_MS_MAX),
          );
    const pages = new Map<string | null, P>();
    if (selfCounts || answers.size === 0) pages.set(null, here());
    for (const [address, answer] of answers) pages.set(address, answer as unknown as P);
    return pages;
  }

  /** The upload ids among `ids` that a replica lacking them ended (see the header). */
  private async ended(
    query: { tenantId: string; bucket: string },
    pages: ReadonlyMap<string | null, Page<unknown> & { upload?: MultipartUploadRecord }>,
    ids: readonly string[],
  ): Promise<Set<string>> {
    const ended = new Set<string>();
    for (const [address, page] of pages) {
      const held = new Set<string>();
      if (page.upload !== undefined) held.add(page.upload.uploadId);
      for (const item of page.items) {
        const id = (item as { uploadId?: unknown }).uploadId;
        if (typeof id === 'string') held.add(id);
      }
      const lacking = ids.filter((id) => !held.has(id));
      if (lacking.length === 0) continue;
      const args = { ...query, uploadIds: lacking };
      const answer =
        address === null
          ? this.endedHere(args)
          : await this.replicator.call(address, 'uploads-ended', args, HEAD_MS_MAX);
      for (const id of answer['ended'] as string[]) ended.add(id);
    }
    return ended;
  }

  private uploadsHere(query: UploadsQuery): Page<MultipartUploadRecord> {
    const { bucket } = this.replicator.bucketOf({ ...query });
    this.local.store.refresh();
    return uploadsPage(this.local.store, bucket.id, query);
  }

  private partsHere(query: PartsQuery): PartsPage {
    const { bucket } = this.replicator.bucketOf({ ...query });
    const { store } = this.local;
    store.refresh();
    const upload = isUploadId(query.uploadId)
      ? store.get<MultipartUploadRecord>(
          DB.multipart,
          multipartUploadKey(bucket.id, query.key, query.uploadId),
        )
      : undefined;
    if (upload === undefined) return { items: [], truncated: false };
    const range = multipartPartRange(bucket.id, query.key, query.uploadId);
    const start = Buffer.concat([range.start, Buffer.alloc(4)]);
    start.writeUInt32BE(query.marker + 1, start.length - 4);
    const items: PartView[] = [];
    for (const { value } of store.range<MultipartPartRecord>(DB.multipartParts, {
      start,
      end: range.end,
      limit: query.max + 1,
    }))
      items.push(partView(value));
    return { upload, items: items.slice(0, query.max), truncated: items.length > query.max };
  }

  private endedHere(body: Record<string, unknown>): Record<string, unknown> {
    const { bucket } = this.replicator.bucketOf(body);
    const ids = body['uploadIds'];
    if (!Array.isArray(ids) || ids.length > MULTIPART_MERGE_MAX)
      throw BadRequest(`uploads-ended takes at most ${MULTIPART_MERGE_MAX} upload ids`);
    this.local.store.refresh();
    return {
      ended: ids.filter((id) => typeof id === 'string' && this.replicator.uploadEnded(bucket, id)),
    };
  }
}

/** A replica's page of uploads after the markers (as service/multipart.ts lists them). */
export function uploadsPage(
  store: IndexStore,
  bucketId: number,
  query: UploadsQuery,
): Page<MultipartUploadRecord> {
  const range = prefixRange(bucketId, query.prefix);
  let start = range.start;
  if (query.keyMarker !== undefined) {
    const after =
      query.uploadIdMarker !== undefined && isUploadId(query.uploadIdMarker)
        ? Buffer.concat([
            multipartUploadKey(bucketId, query.keyMarker, query.uploadIdMarker),
            Buffer.from([0]),
          ])
        : Buffer.concat([objectKey(bucketId, query.keyMarker), Buffer.from([1])]);
    if (Buffer.compare(after, start) > 0) start = after;
  }
  const items: MultipartUploadRecord[] = [];
  for (const { value } of store.range<MultipartUploadRecord>(DB.multipart, {
    start,
    end: range.end,
    limit: query.max + 1,
  }))
    items.push(value);
  return { items: items.slice(0, query.max), truncated: items.length > query.max };
}

function pageSize(max: unknown): max is number {
  return (
    typeof max === 'number' && Number.isSafeInteger(max) && max >= 1 && max <= MULTIPART_MERGE_MAX
  );
}

function uploadsOf(body: Record<string, unknown>): UploadsQuery {
  const { tenantId, bucket, prefix, keyMarker, uploadIdMarker, max } = body;
  if (
    typeof tenantId !== 'string' ||
    typeof bucket !== 'string' ||
    typeof prefix !== 'string' ||
    (keyMarker !== undefined && typeof keyMarker !== 'string') ||
    (uploadIdMarker !== undefined && typeof uploadIdMarker !== 'string') ||
    !pageSize(max)
  )
    throw BadRequest(
      'an uploads page is {tenantId, bucket, prefix, keyMarker?, uploadIdMarker?, ' +
        `max of 1 to ${MULTIPART_MERGE_MAX}}`,
    );
  return {
    tenantId,
    bucket,
    prefix,
    max,
    ...(keyMarker === undefined ? {} : { keyMarker }),
    ...(uploadIdMarker === undefined ? {} : { uploadIdMarker }),
  };
}

function partsOf(body: Record<string, unknown>): PartsQuery {
  const { tenantId, bucket, key, uploadId, marker, max } = body;
  if (
    typeof tenantId !== 'string' ||
    typeof bucket !== 'string' ||
    typeof key !== 'string' ||
    typeof uploadId !== 'string' ||
    typeof marker !== 'number' ||
    !Number.isSafeInteger(marker) ||
    marker < 0 ||
    !pageSize(max)
  )
    throw BadRequest(
      `a parts page is {tenantId, bucket, key, uploadId, marker, max of 1 to ${MULTIPART_MERGE_MAX}}`,
    );
  return { tenantId, bucket, key, uploadId, marker, max };
}
