// Reclaiming the space of copies this node no longer holds as a replica (docs/cluster.md §8a,
// "Reclaiming space"): a drained member once its drain is done, and any member whose rebalance
// finds buckets whose replica set (by the current layout) leaves it out, after a layout change or
// copies its reads fetched.
//
// A key's copy here is dropped only once a majority of the bucket's current replica set answered
// that it holds the key at least as new as this node does (its newest version's sequence, or a
// newer write or delete): so every acknowledged write stays on a majority of its replicas. A key
// not confirmed (a replica down, an older copy there, a delete marker as this node's newest) is
// kept and counted, for a later rebalance. Dropping is `dropReplicaKeys` in the engine: the
// versions' chunk references are released (compaction frees the bytes), no delete is recorded.
// Tombstones of such a bucket go once a majority holds the delete or something newer.

import {
  DB,
  objectKey,
  prefixRange,
  tenantChildRange,
  type BucketRecord,
  type ObjectVersionRecord,
  type TenantRecord,
} from '../engine/index/schema.js';
import type { DropReplicaResult } from '../engine/ops/replica-drop.js';
import { REPAIR_PAGE_KEYS, type RepairPeer } from './repair.js';

const ONE = Buffer.from([1]);

export interface ReclaimCounts {
  /** Buckets whose replica set leaves this node out. */
  buckets: number;
  keysDropped: number;
  /** Keys kept: not confirmed by a majority of the replica set. */
  keysKept: number;
  versionsDropped: number;
  logicalBytes: number;
  /** Stored bytes no version on this node references any more (compaction frees them). */
  physicalBytes: number;
  tombstonesDropped: number;
}

export function emptyReclaimCounts(): ReclaimCounts {
  return {
    buckets: 0,
    keysDropped: 0,
    keysKept: 0,
    versionsDropped: 0,
    logicalBytes: 0,
    physicalBytes: 0,
    tombstonesDropped: 0,
  };
}

/** What reclaiming needs of the replicator (replication.ts). */
export interface ReclaimPeer extends Pick<
  RepairPeer,
  'log' | 'store' | 'heads' | 'tombstones' | 'dropTombstones'
> {
  /** The bucket's replica set by the current layout: whether it names this node, the others. */
  replicaSet(bucket: BucketRecord): { self: boolean; addresses: string[]; needed: number };
  dropKeys(
    tenant: TenantRecord,
    bucket: BucketRecord,
    keys: ReadonlyArray<{ key: string; seq: number }>,
  ): Promise<DropReplicaResult>;
}

/** Reclaims this node's copies of every bucket of `tenant` (or one) it is no replica of. */
export async function reclaimTenant(
  peer: ReclaimPeer,
  tenant: TenantRecord,
  bucketName?: string,
): Promise<ReclaimCounts> {
  const counts = emptyReclaimCounts();
  const buckets = [...peer.store.range<BucketRecord>(DB.buckets, tenantChildRange(tenant.id))]
    .map((entry) => entry.value)
    .filter((bucket) => bucketName === undefined || bucket.name === bucketName);
  for (const bucket of buckets) {
    const set = peer.replicaSet(bucket);
    // Without another replica to confirm against, nothing may go.
    if (set.self || set.addresses.length < set.needed || set.needed === 0) continue;
    counts.buckets += 1;
    await reclaimKeys(peer, tenant, bucket, set, counts);
    await reclaimTombstones(peer, tenant, bucket, set, counts);
  }
  return counts;
}

async function reclaimKeys(
  peer: ReclaimPeer,
  tenant: TenantRecord,
  bucket: BucketRecord,
  set: { addresses: string[]; needed: number },
  counts: ReclaimCounts,
): Promise<void> {
  const range = prefixRange(bucket.id, '');
  let after: string | undefined;
  for (;;) {
    const page = newestVersions(peer, bucket, range, after);
    if (page.length === 0) return;
    after = page[page.length - 1]?.key;
    const held = await confirmed(peer, tenant, bucket, set, page);
    const drop = page.filter((_entry, index) => held[index] === true);
    counts.keysKept += page.length - drop.length;
    if (drop.length === 0) continue;
    const result = await peer.dropKeys(tenant, bucket, drop);
    counts.keysDropped += drop.length;
    counts.versionsDropped += result.versions;
    counts.logicalBytes += result.logicalBytes;
    counts.physicalBytes += result.physicalBytes;
  }
}

/** Up to a page of this node's keys after `after`, each with its newest version's sequence. */
function newestVersions(
  peer: ReclaimPeer,
  bucket: BucketRecord,
  range: { start: Buffer; end: Buffer },
  after: string | undefined,
): Array<{ key: string; seq: number }> {
  const page: Array<{ key: string; seq: number }> = [];
  // Versions sort by key, then newest first: the first of each key is its newest. A version key
  // is the object key, a 0 byte and the inverted sequence, so `after`'s versions end before 1.
  const start =
    after === undefined ? range.start : Buffer.concat([objectKey(bucket.id, after), ONE]);
  for (const { value } of peer.store.range<ObjectVersionRecord>(DB.versions, {
    start,
    end: range.end,
  })) {
    if (page[page.length - 1]?.key === value.key) continue;
    if (page.length === REPAIR_PAGE_KEYS) break;
    page.push({ key: value.key, seq: value.seq });
  }
  return page;
}

async function reclaimTombstones(
  peer: ReclaimPeer,
  tenant: TenantRecord,
  bucket: BucketRecord,
  set: { addresses: string[]; needed: number },
  counts: ReclaimCounts,
): Promise<void> {
  let after: string | undefined;
  for (;;) {
    const tombs = peer.tombstones(bucket, after, REPAIR_PAGE_KEYS);
    if (tombs.length === 0) return;
    after = tombs[tombs.length - 1]?.key;
    const held = await confirmed(peer, tenant, bucket, set, tombs);
    const drop = tombs.filter((_tomb, index) => held[index] === true);
    if (drop.length === 0) continue;
    await peer.dropTombstones(bucket, drop);
    counts.tombstonesDropped += drop.length;
  }
}

/** For each entry: whether `needed` of the replicas hold its key at least as new. */
async function confirmed(
  peer: ReclaimPeer,
  tenant: TenantRecord,
  bucket: BucketRecord,
  set: { addresses: string[]; needed: number },
  entries: ReadonlyArray<{ key: string; seq: number }>,
): Promise<boolean[]> {
  const keys = entries.map((entry) => entry.key);
  const holders = new Array<number>(entries.length).fill(0);
  await Promise.all(
    set.addresses.map(async (address) => {
      const heads = await peer
        .heads(address, { tenantId: tenant.id, bucket: bucket.name, keys })
        .catch((error: unknown) => {
          peer.log.warn({ err: error, address }, 'replica did not answer; its keys are kept');
          return [];
        });
      for (const [index, head] of heads.entries())
        if (head.seq >= (entries[index]?.seq ?? Infinity))
          holders[index] = (holders[index] ?? 0) + 1;
    }),
  );
  return holders.map((count) => count >= set.needed);
}
