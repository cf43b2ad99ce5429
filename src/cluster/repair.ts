// Anti-entropy between the replicas of a bucket (docs/cluster.md §9, as built): this node pushes
// every write it holds that a replica lacks or holds older. Run on every replica of a bucket, it
// leaves each of them with the newest write of every key any of them held (the union), whatever
// writes each missed while it was down or cut off, and it puts a bucket's data on the nodes that
// newly became its replicas after a membership change (rebalance).
//
// A page of REPAIR_PAGE_KEYS current versions (and then of tombstones) is read from the index,
// each replica is asked for its newest sequence of those keys in one message, and what it lacks
// is copied as a replicated write (records verified by the receiver, then the version with its
// sequence) or a replicated delete; a replica that holds the version but missed a later change of
// its tags, retention or legal hold (those keep the version's sequence, and carry one of their own)
// is sent the version's metadata. Copies are throttled to REPAIR_BYTES_PER_S per node, so a
// rebalance does not starve the data path. A dry run only counts. A current delete marker a
// replica lacks is sent as a replicated delete with its sequence. In a versioned bucket every
// version a replica lacks, non-current ones and delete markers included, is then copied with its
// id, sequence and time (`repairVersions`). Tombstones past their grace
// period that no replica needs any more are collected: those of unversioned deletes
// (`collectTombstones`), of versions deleted by id and of uploads ended, and the metadata stamps
// of versions gone (`collectEndTombstones`).

import {
  DB,
  prefixRange,
  tenantChildRange,
  type BucketRecord,
  type ObjectVersionRecord,
  type TenantRecord,
} from '../engine/index/schema.js';
import type { IndexStore } from '../engine/index/store.js';
import type { Logger } from '../util/log.js';

export const REPAIR_PAGE_KEYS = 256;
/** The most a repair copies per second from one node (100 MB/s). */
export const REPAIR_BYTES_PER_S = 100_000_000;

export interface RepairCounts {
  buckets: number;
  objectsChecked: number;
  copiesSent: number;
  deletesSent: number;
  bytesSent: number;
  replicasUnreachable: number;
  tombstonesCollected: number;
  /** Versions whose tags, retention and legal hold were sent to a replica that missed a change. */
  metadataSent: number;
}

export function emptyCounts(): RepairCounts {
  return {
    buckets: 0,
    objectsChecked: 0,
    copiesSent: 0,
    deletesSent: 0,
    bytesSent: 0,
    replicasUnreachable: 0,
    tombstonesCollected: 0,
    metadataSent: 0,
  };
}

export function addCounts(into: RepairCounts, from: Partial<RepairCounts>): void {
  for (const field of Object.keys(into) as Array<keyof RepairCounts>)
    into[field] += typeof from[field] === 'number' ? from[field] : 0;
}

/** What repair needs of the replicator (replication.ts), as one interface. */
export interface RepairPeer {
  readonly log: Logger;
  readonly store: IndexStore;
  /** The other replicas of `bucket` with their data addresses. */
  otherReplicas(bucket: BucketRecord): string[];
  /**
   * Every other member that may hold a copy of `bucket`'s objects, by data address: its replicas
   * under every layout still live, the old replicas whose copies are not reclaimed yet, the
   * members whose reads fetched copies (so every member that may hold data: tombstone GC asks
   * them all, or collects nothing).
   */
  holders(bucket: BucketRecord): string[];
  heads(
    address: string,
    args: { tenantId: string; bucket: string; keys: string[] },
  ): Promise<Array<{ seq: number; deleted: boolean; mseq?: number }>>;
  /** The sequence of the last metadata change of version `seq` of `key` here; 0 for none. */
  stampOf(bucketId: number, key: string, seq: number): number;
  /** Sends the version's tags, retention and legal hold, as of change `mseq`. */
  sendMetadata(
    address: string,
    bucket: BucketRecord,
    version: ObjectVersionRecord,
    mseq: number,
  ): Promise<void>;
  /** Copies the version to `address` (records, then the version); answers the bytes sent. */
  copyVersion(
    address: string,
    tenant: TenantRecord,
    bucket: BucketRecord,
    version: ObjectVersionRecord,
  ): Promise<number>;
  /** For each version, whether the replica at `address` needs no copy of it. */
  versionsHeld(
    address: string,
    args: {
      tenantId: string;
      bucket: string;
      items: ReadonlyArray<{ key: string; seq: number; versionId: string }>;
    },
  ): Promise<boolean[]>;
  /**
   * Copies a version of any age (a non-current one, a delete marker) to `address` with its id,
   * sequence and time (records, then the version); answers the bytes sent.
   */
  copyOldVersion(
    address: string,
    tenant: TenantRecord,
    bucket: BucketRecord,
    version: ObjectVersionRecord,
  ): Promise<number>;
  /** A replicated delete of `key` with the sequence and time (ms) of the delete it repairs. */
  sendDelete(
    address: string,
    bucket: BucketRecord,
    key: string,
    seq: number,
    time: number,
  ): Promise<void>;
  tombstones(
    bucket: BucketRecord,
    after: string | undefined,
    limit: number,
  ): Array<{ key: string; seq: number }>;
  /** When the write of sequence `seq` was made (ms since 1970). */
  timeOfSeq(seq: number): number;
  /** Removes these tombstones, each only while it still has the sequence given. */
  dropTombstones(
    bucket: BucketRecord,
    tombs: ReadonlyArray<{ key: string; seq: number }>,
  ): Promise<void>;
  /** A page of this node's tombstones of one kind, after the position `after`. */
  endTombstones(
    bucket: BucketRecord,
    kind: EndTombstone['kind'],
    after: string | undefined,
    limit: number,
  ): EndTombstone[];
  /** For each item, whether the replica at `address` holds a live copy of what it ended. */
  holdsLive(
    address: string,
    args: {
      tenantId: string;
      bucket: string;
      kind: EndTombstone['kind'];
      items: ReadonlyArray<EndTombstone>;
    },
  ): Promise<boolean[]>;
  dropEndTombstones(bucket: BucketRecord, tombs: ReadonlyArray<EndTombstone>): Promise<void>;
  /** Drops the metadata stamps of versions not held here, made before `before`; answers how many. */
  dropOrphanStamps(bucket: BucketRecord, before: number): Promise<number>;
}

/**
 * A tombstone of a version deleted by its id (`vtomb/`) or of an upload completed or aborted
 * (`utomb/`), as repair collects them: `at` is its position in this node's scan, `time` when it
 * was written, `id` the version or upload id, `key` the object key (absent on an upload's
 * tombstone written before keys were recorded: such a one is collected only once no replica
 * holds the upload open, asked by id alone).
 */
export interface EndTombstone {
  kind: 'version' | 'upload';
  at: string;
  time: number;
  id: string;
  key?: string;
}

/**
 * How old a tombstone must be before it may be collected: longer than any replica is expected to
 * stay down and come back (a node down longer must be wiped and rejoined, or a delete it missed
 * could come back once every tombstone of it is gone), as Cassandra's gc_grace_seconds.
 */
export const TOMBSTONE_GRACE_MS = 24 * 60 * 60 * 1000;

/** Repairs every bucket of `tenant` (or only `bucketName`) from this node's copies. */
export async function repairTenant(
  peer: RepairPeer,
  tenant: TenantRecord,
  bucketName: string | undefined,
  dryRun: boolean,
): Promise<RepairCounts> {
  const counts = emptyCounts();
  const throttle = new Throttle(REPAIR_BYTES_PER_S);
  for (const { value: bucket } of peer.store.range<BucketRecord>(
    DB.buckets,
    tenantChildRange(tenant.id),
  )) {
    if (bucketName !== undefined && bucket.name !== bucketName) continue;
    counts.buckets += 1;
    await repairBucket(peer, tenant, bucket, { dryRun, counts, throttle });
  }
  return counts;
}

async function repairBucket(
  peer: RepairPeer,
  tenant: TenantRecord,
  bucket: BucketRecord,
  run: { dryRun: boolean; counts: RepairCounts; throttle: Throttle },
): Promise<void> {
  const others = peer.otherReplicas(bucket);
  if (others.length === 0) return;
  const range = prefixRange(bucket.id, '');
  let start = range.start;
  for (;;) {
    const page: ObjectVersionRecord[] = [];
    for (const { key, value } of peer.store.range<ObjectVersionRecord>(DB.objects, {
      start,
      end: range.end,
      limit: REPAIR_PAGE_KEYS,
    })) {
      page.push(value);
      start = Buffer.concat([key, Buffer.from([0])]);
    }
    if (page.length === 0) break;
    run.counts.objectsChecked += page.length;
    await pushNewer(peer, others, tenant, bucket, run, {
      keys: page.map((version) => version.key),
      send: async (address, index) => {
        const version = page[index] as ObjectVersionRecord;
        if (version.deleteMarker !== true)
          return peer.copyVersion(address, tenant, bucket, version);
        // A delete marker is made on the replica by a replicated delete with its sequence, so
        // its version id agrees, and with its time, so its LastModified does too.
        await peer.sendDelete(address, bucket, version.key, version.seq, version.lastModified);
        run.counts.deletesSent += 1;
        return 0;
      },
      seqOf: (index) => (page[index] as ObjectVersionRecord).seq,
      metadata: {
        mseqOf: (index) => {
          const version = page[index] as ObjectVersionRecord;
          return peer.stampOf(bucket.id, version.key, version.seq);
        },
        send: (address, index, mseq) =>
          peer.sendMetadata(address, bucket, page[index] as ObjectVersionRecord, mseq),
      },
    });
  }
  let after: string | undefined;
  for (;;) {
    const tombs = peer.tombstones(bucket, after, REPAIR_PAGE_KEYS);
    if (tombs.length === 0) break;
    after = tombs[tombs.length - 1]?.key;
    await pushNewer(peer, others, tenant, bucket, run, {
      keys: tombs.map((tomb) => tomb.key),
      send: async (address, index) => {
        const tomb = tombs[index] as { key: string; seq: number };
        await peer.sendDelete(address, bucket, tomb.key, tomb.seq, peer.timeOfSeq(tomb.seq));
        run.counts.deletesSent += 1;
        return 0;
      },
      seqOf: (index) => (tombs[index] as { seq: number }).seq,
    });
    const due = Date.now() - TOMBSTONE_GRACE_MS;
    const old = tombs.filter((tomb) => peer.timeOfSeq(tomb.seq) < due);
    if (!run.dryRun && old.length > 0) await collectTombstones(peer, tenant, bucket, old, run);
  }
  // Not under lifecycle rules: each replica expires versions on its own clock, without a
  // replicated tombstone, and makes its own expiry markers, so a copy would bring back a version
  // another replica expired, or a second marker (docs/cluster.md §8a).
  const expiring = bucket.lifecycle !== undefined && bucket.lifecycle.length > 0;
  if (bucket.versioning !== 'Unversioned' && !expiring)
    await repairVersions(peer, others, tenant, bucket, run);
  if (!run.dryRun) await collectEndTombstones(peer, tenant, bucket, run.counts);
}

/**
 * Every version of a versioned bucket (non-current ones and delete markers too) that a replica
 * lacks is copied to it with its id, sequence and time, a page of REPAIR_PAGE_KEYS versions at a
 * time. Current versions were pushed by the pass over the keys already; one a replica still lacks
 * (its copy failed) is sent here the same way. An unversioned bucket holds only current versions.
 */
async function repairVersions(
  peer: RepairPeer,
  others: readonly string[],
  tenant: TenantRecord,
  bucket: BucketRecord,
  run: { dryRun: boolean; counts: RepairCounts; throttle: Throttle },
): Promise<void> {
  const range = prefixRange(bucket.id, '');
  let start = range.start;
  for (;;) {
    const page: ObjectVersionRecord[] = [];
    for (const { key, value } of peer.store.range<ObjectVersionRecord>(DB.versions, {
      start,
      end: range.end,
      limit: REPAIR_PAGE_KEYS,
    })) {
      page.push(value);
      start = Buffer.concat([key, Buffer.from([0])]);
    }
    if (page.length === 0) return;
    const items = page.map(({ key, seq, versionId }) => ({ key, seq, versionId }));
    for (const address of others) {
      const held = await peer
        .versionsHeld(address, { tenantId: tenant.id, bucket: bucket.name, items })
        .catch((error: unknown) => {
          peer.log.warn(
            { err: error, address },
            'versions not repaired: the replica did not answer',
          );
          return undefined;
        });
      if (held === undefined || held.length !== page.length) {
        run.counts.replicasUnreachable += 1;
        continue;
      }
      for (const [index, version] of page.entries()) {
        if (held[index] === true) continue;
        const marker = version.deleteMarker === true;
        if (marker) run.counts.deletesSent += 1;
        else run.counts.copiesSent += 1;
        if (run.dryRun) continue;
        const bytes = await peer.copyOldVersion(address, tenant, bucket, version);
        run.counts.bytesSent += bytes;
        await run.throttle.spend(bytes);
      }
    }
  }
}

/**
 * GC of the tombstones of versions deleted by id and of uploads ended (see `EndTombstone`): one
 * past its grace period goes once every other member that may hold the bucket's objects
 * (`holders`: not only the current replicas, since an old replica not reclaimed yet, or a copy a
 * read fetched, could bring it back through a repair or a merged listing) answered that it holds
 * no live copy of what it ended (the version, the upload still open). A member that does not
 * answer keeps the page's. Then the metadata stamps of versions this node no longer holds are
 * dropped.
 */
async function collectEndTombstones(
  peer: RepairPeer,
  tenant: TenantRecord,
  bucket: BucketRecord,
  counts: RepairCounts,
): Promise<void> {
  const due = Date.now() - TOMBSTONE_GRACE_MS;
  const others = peer.holders(bucket);
  for (const kind of ['version', 'upload'] as const) {
    let after: string | undefined;
    for (;;) {
      const page = peer.endTombstones(bucket, kind, after, REPAIR_PAGE_KEYS);
      if (page.length === 0) break;
      after = page[page.length - 1]?.at;
      const old = page.filter((tomb) => tomb.time < due);
      if (old.length === 0) continue;
      const live = new Set<number>();
      let answered = true;
      for (const address of others) {
        const held = await peer
          .holdsLive(address, { tenantId: tenant.id, bucket: bucket.name, kind, items: old })
          .catch(() => undefined);
        if (held === undefined || held.length !== old.length) {
          answered = false;
          break;
        }
        for (const [index, yes] of held.entries()) if (yes) live.add(index);
      }
      if (!answered) continue;
      const collected = old.filter((_tomb, index) => !live.has(index));
      if (collected.length === 0) continue;
      await peer.dropEndTombstones(bucket, collected);
      counts.tombstonesCollected += collected.length;
    }
  }
  counts.tombstonesCollected += await peer.dropOrphanStamps(bucket, due);
}

/**
 * Tombstone GC: a tombstone past its grace period goes once every other member that may hold the
 * bucket's objects (`holders`) answered that it holds no older version of the key (nothing, its
 * own tombstone, or a newer write), so no copy is left that could bring the deleted object back.
 * A member that does not answer keeps every tombstone of the page. Each replica collects its own
 * on its next repair.
 */
async function collectTombstones(
  peer: RepairPeer,
  tenant: TenantRecord,
  bucket: BucketRecord,
  tombs: ReadonlyArray<{ key: string; seq: number }>,
  run: { counts: RepairCounts },
): Promise<void> {
  const kept = new Set<number>();
  for (const address of peer.holders(bucket)) {
    let heads: Array<{ seq: number; deleted: boolean }>;
    try {
      heads = await peer.heads(address, {
        tenantId: tenant.id,
        bucket: bucket.name,
        keys: tombs.map((tomb) => tomb.key),
      });
    } catch {
      return;
    }
    for (const [index, head] of heads.entries()) {
      const tomb = tombs[index] as { seq: number };
      if (head.seq !== 0 && head.seq < tomb.seq) kept.add(index);
    }
  }
  const collected = tombs.filter((_tomb, index) => !kept.has(index));
  if (collected.length === 0) return;
  await peer.dropTombstones(bucket, collected);
  run.counts.tombstonesCollected += collected.length;
}

async function pushNewer(
  peer: RepairPeer,
  others: readonly string[],
  tenant: TenantRecord,
  bucket: BucketRecord,
  run: { dryRun: boolean; counts: RepairCounts; throttle: Throttle },
  page: {
    keys: string[];
    send: (address: string, index: number) => Promise<number>;
    seqOf: (index: number) => number;
    /** Where a replica holds the same version: its metadata, sent when it missed a change. */
    metadata?: {
      mseqOf: (index: number) => number;
      send: (address: string, index: number, mseq: number) => Promise<void>;
    };
  },
): Promise<void> {
  for (const address of others) {
    let heads: Array<{ seq: number; deleted: boolean; mseq?: number }>;
    try {
      heads = await peer.heads(address, {
        tenantId: tenant.id,
        bucket: bucket.name,
        keys: page.keys,
      });
    } catch (error) {
      peer.log.warn({ err: error, address }, 'replica not repaired: it did not answer');
      run.counts.replicasUnreachable += 1;
      continue;
    }
    for (const [index, head] of heads.entries()) {
      if (head.seq === page.seqOf(index) && page.metadata !== undefined && !head.deleted) {
        const mseq = page.metadata.mseqOf(index);
        if (mseq <= (head.mseq ?? 0)) continue;
        run.counts.metadataSent += 1;
        if (!run.dryRun) await page.metadata.send(address, index, mseq);
        continue;
      }
      if (head.seq >= page.seqOf(index)) continue;
      if (run.dryRun) {
        run.counts.copiesSent += 1;
        continue;
      }
      const bytes = await page.send(address, index);
      if (bytes > 0) {
        run.counts.copiesSent += 1;
        run.counts.bytesSent += bytes;
        await run.throttle.spend(bytes);
      }
    }
  }
}

/** At most `bytesPerS` on average: waits when the bytes sent run ahead of the clock. */
class Throttle {
  private readonly started = performance.now();
  private sent = 0;

  constructor(private readonly bytesPerS: number) {}

  async spend(bytes: number): Promise<void> {
    this.sent += bytes;
    const due = (this.sent / this.bytesPerS) * 1000 - (performance.now() - this.started);
    if (due > 0) await new Promise((resolve) => setTimeout(resolve, due));
  }
}
