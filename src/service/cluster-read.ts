// Reads on a cluster member (docs/cluster.md §8): before a read resolves the current version of
// a key, the node's engine makes its copy as new as a majority of the key's replicas hold
// (cluster/replication.ts). A single node, which has no cluster revision in its index, skips
// this at the cost of one local read. Listings likewise make a page's range current first, and a
// chunk whose copy here fails its checksum is replaced from another member before it is read
// again (service/download.ts). A page of versions is merged from a majority of the replicas
// (cluster/versions-listing.ts), and so are pages of uploads and parts (cluster/uploads-listing.ts).

import type { IndexStore } from '../engine/index/store.js';
import type { EngineClient } from '../engine/protocol.js';
import { DB, type BucketRecord } from '../engine/index/schema.js';
import { META_CLUSTER_REVISION } from '../engine/command-router.js';
import { LIST_FRESHEN_KEYS_MAX } from '../cluster/listing.js';
import { listVersionsPage, type VersionsPageResult, type VersionsQuery } from './versions.js';
import {
  listPartsPage,
  listUploadsPage,
  partsPage,
  requireUploadIn,
  uploadsPage,
  type PartsPage,
  type UploadAddress,
  type UploadsMarkers,
  type UploadsPage,
} from './multipart.js';
import type { MultipartUploadRecord } from '../engine/index/schema.js';
import { NotFound } from '../util/errors.js';

/** Undefined when nothing is to be done (a single node, or a version named by its id). */
export function freshenForRead(
  store: IndexStore,
  engine: EngineClient,
  bucket: BucketRecord,
  key: string,
  versionId: string | null,
): Promise<void> | undefined {
  if (versionId !== null || !store.has(DB.meta, META_CLUSTER_REVISION)) return undefined;
  return engine
    .call('clusterFreshen', { tenantId: bucket.tenantId, bucket: bucket.name, key })
    .then(() => store.refresh());
}

/**
 * Before a page of a listing on a cluster member: the engine makes this node's copy of the
 * page's range of keys as new as a majority of the bucket's replicas hold it
 * (cluster/listing.ts). Undefined on a single node.
 */
export function freshenForList(
  store: IndexStore,
  engine: EngineClient,
  bucket: BucketRecord,
  range: { prefix: string; after: string | undefined; limit: number },
): Promise<void> | undefined {
  if (!store.has(DB.meta, META_CLUSTER_REVISION) || range.limit < 1) return undefined;
  return engine
    .call('clusterFreshenList', {
      tenantId: bucket.tenantId,
      bucket: bucket.name,
      prefix: range.prefix,
      ...(range.after === undefined ? {} : { after: range.after }),
      // One key past the page, so that this node knows whether the page is truncated.
      limit: Math.min(range.limit, LIST_FRESHEN_KEYS_MAX - 1) + 1,
    })
    .then(() => store.refresh());
}

/**
 * What a download calls when this node's copy of a chunk fails its checksum: on a cluster member
 * the engine replaces it with a good copy from another member (cluster/replication.ts
 * `repairChunkOf`) and answers whether it did; a single node answers false at the cost of one
 * local read.
 */
export function chunkRepairOf(
  store: IndexStore,
  engine: EngineClient,
): (tenantNum: number, chunkId: Uint8Array) => Promise<boolean> {
  return async (tenantNum, chunkId) => {
    if (!store.has(DB.meta, META_CLUSTER_REVISION)) return false;
    const chunk = Buffer.from(chunkId.buffer, chunkId.byteOffset, chunkId.byteLength);
    const { repaired } = await engine.call('clusterRepairChunk', {
      tenantNum,
      chunkId: chunk.toString('hex'),
    });
    return repaired;
  };
}

/**
 * A page of a bucket's versions: on a cluster member, merged from a majority of the bucket's
 * replicas by the engine (cluster/versions-listing.ts), since a replica that was down lacks the
 * versions written meanwhile; on a single node, this node's own page.
 */
export async function versionsPageOf(
  store: IndexStore,
  engine: EngineClient,
  bucket: BucketRecord,
  query: VersionsQuery,
): Promise<VersionsPageResult> {
  if (!store.has(DB.meta, META_CLUSTER_REVISION)) return listVersionsPage(store, bucket, query);
  const { delimiter, keyMarker } = query;
  const versionIdMarker = query.versionIdMarker || undefined;
  const merged = await engine.call('clusterListVersions', {
    tenantId: bucket.tenantId,
    bucket: bucket.name,
    prefix: query.prefix,
    maxKeys: query.maxKeys,
    ...(delimiter === undefined || delimiter === '' ? {} : { delimiter }),
    ...(keyMarker === undefined ? {} : { keyMarker }),
    ...(versionIdMarker === undefined ? {} : { versionIdMarker }),
  });
  return merged ?? listVersionsPage(store, bucket, query);
}

/**
 * A page of a bucket's uploads in progress: on a cluster member, merged from a majority of the
 * bucket's replicas (cluster/uploads-listing.ts); on a single node, this node's own page.
 */
export async function uploadsPageOf(
  store: IndexStore,
  engine: EngineClient,
  bucket: BucketRecord,
  page: UploadsMarkers & { prefix: string; max: number },
): Promise<UploadsPage> {
  if (!store.has(DB.meta, META_CLUSTER_REVISION)) return listUploadsPage(store, bucket, page);
  const merged = await engine.call('clusterListUploads', {
    tenantId: bucket.tenantId,
    bucket: bucket.name,
    ...page,
  });
  return merged === null
    ? listUploadsPage(store, bucket, page)
    : uploadsPage(merged.uploads, merged.isTruncated);
}

/**
 * A page of an upload's parts, with the upload (404 when there is none): on a cluster member,
 * merged from a majority of the bucket's replicas, so a node that missed the upload's create or
 * some of its parts lists them all; on a single node, this node's own page.
 */
export async function partsPageOf(
  store: IndexStore,
  engine: EngineClient,
  address: UploadAddress,
  page: { marker: number; max: number },
): Promise<PartsPage & { upload: MultipartUploadRecord }> {
  if (!store.has(DB.meta, META_CLUSTER_REVISION)) {
    const upload = requireUploadIn(store, address);
    return { upload, ...listPartsPage(store, upload, page) };
  }
  const merged = await engine.call('clusterListParts', {
    tenantId: address.bucket.tenantId,
    bucket: address.bucket.name,
    key: address.key,
    uploadId: address.uploadId,
    ...page,
  });
  if (merged === null) {
    const upload = requireUploadIn(store, address);
    return { upload, ...listPartsPage(store, upload, page) };
  }
  if (merged.upload === null)
    throw NotFound(`upload ${address.uploadId.slice(0, 64)} of ${address.key} not found`);
  return { upload: merged.upload, ...partsPage(merged.parts, merged.isTruncated) };
}
