// Replicated objects (docs/cluster.md §8, as built): in a member's engine process, writes of
// objects are copied to the replicas of their bucket and acknowledged once a majority of them has
// each made the copy durable; reads first make this node's copy current from a majority.
//
// - Placement: a bucket's replicas are its partition's in the stored layout's partition table
//   (layout.ts: `min(replicationFactor, storage members)` nodes per partition, zone-aware and
//   capacity-weighted), so every node reads the same set.
// - Order: every replicated write carries a sequence `((ms since 2025) × 256 + n) × 128 + node
//   number`, a hybrid logical clock: it grows on each node, takes the largest it has seen from
//   others, and the node number (from etcd, once per node) makes it unique in the cluster. The
//   newest sequence wins (last writer wins, as Garage's objects do). It is the version's `seq`
//   on every replica, so a versioned bucket's version ids agree everywhere.
// - A write (`putObject`, `deleteObject`) runs here first, as on a single node (its rules,
//   conditions, quota, idempotency and audit row), then its chunk records (bytes as stored:
//   encrypted under the tenant's key, which every member holds) and its manifest go to every
//   other replica, which verifies each record's checksums, appends it to its own segments,
//   fdatasyncs, and commits the version with the same sequence. The answer waits for a majority
//   of the replica set, this node counted when it is one; fewer is 503 `unavailable` (the write
//   may still be found later on the replicas that took it).
// - A replica refuses nothing newer: an incoming write older than what it holds for the key (a
//   newer version, or the tombstone of a newer delete) is acknowledged and dropped. An unversioned
//   delete leaves a tombstone (the delete's sequence) so that a replica that missed it cannot
//   bring the object back.
// - Fencing by layout: every message carries the version of the layout its sender placed it by
//   (layout.ts). A replica that has seen a newer layout refuses a replicated write of an older one
//   (`stale_layout`), also when the layout changed while it applied it; the coordinator then
//   reads the layout and sends the write to the new replica set, at most LAYOUT_ATTEMPTS times.
//   A replica told of a newer layout than its own reads it first. A write also carries its
//   bucket's partition and the partition's leader epoch its coordinator knows (leaders.ts); a
//   replica that has seen a higher epoch refuses it (`stale_epoch`, a deposed leader's view),
//   and the coordinator reads again and re-sends it the same way. So once a layout change's
//   rebalance has begun on a replica (it reads the layout first), no write placed by the old
//   layout is acknowledged by that replica any more: whatever the old set acknowledged before is
//   in the replica's index when its rebalance scans it, and reaches the new set.
// - A read asks the replicas for their newest sequence of the key; once a majority answered, a
//   newer one than this node's is fetched (manifest, then record batches) and committed here,
//   then the read goes on locally. So a node that was down catches up on each key it serves.

import { AsyncLocalStorage } from 'node:async_hooks';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import type { LocalEngine } from '../engine/command-router.js';
import {
  DB,
  chunkKey,
  multipartUploadKey,
  objectKey,
  tenantChildKey,
  tenantKey,
  versionKey,
  type BucketRecord,
  type ChunkRecord,
  segmentKey,
  type ObjectVersionRecord,
  type SegmentRecord,
  type TenantRecord,
} from '../engine/index/schema.js';
import {
  findVersionIn,
  unpackChunkRefs,
  versionIdOf,
  type ManifestChunk,
} from '../engine/ops/objects.js';
import { SegmentWriter } from '../engine/segments/segment-writer.js';
import { segmentFileName } from '../format/segment-header.js';
import { decodeRecordHeader, verifyPayload, RECORD_HEADER_SIZE } from '../format/record-frame.js';
import {
  BadRequest,
  Fenced,
  NotFound,
  StaleEpoch,
  StaleLayout,
  Unavailable,
  errorCode,
} from '../util/errors.js';
import type { Logger } from '../util/log.js';
import { counterOf } from '../util/metrics.js';
import { Gauge, type Registry } from 'prom-client';
import { pack } from 'msgpackr';
import { callData, dataAddressOf, DATA_BATCH_BYTES, type DataHandler } from './data-transport.js';
import type { MemberRecord } from './registry.js';
import { PARTITIONS, partitionOf } from './layout.js';
import {
  emptyReclaimCounts,
  reclaimTenant,
  type ReclaimCounts,
  type ReclaimPeer,
} from './reclaim.js';
import type { DropReplicaResult } from '../engine/ops/replica-drop.js';
import { Hints } from './hints.js';
import {
  addCounts,
  emptyCounts,
  repairTenant,
  REPAIR_PAGE_KEYS,
  type EndTombstone,
  type RepairCounts,
  type RepairPeer,
} from './repair.js';

const EPOCH_MS = Date.UTC(2025, 0, 1);
const NODE_NUMS = 128;
const PER_MS = 256;
/** A tombstone of an unversioned delete, in `meta` under `tomb/<bucketId>/<key>`. */
const TOMB_PREFIX = 'tomb/';
/**
 * The sequence of the last metadata change (tags, retention, legal hold) of a version, in `meta`
 * under `mstamp/<bucketId>/<version seq>/<key>`: repair compares it, since such a change keeps
 * the version's own sequence (see `stampMetadata`).
 */
const STAMP_PREFIX = 'mstamp/';
/**
 * A version deleted by its id, in `meta` under `vtomb/<bucketId>/<versionId>/<key>`: the delete's
 * sequence, so that neither a repair nor a merged versions listing brings back the version from
 * a replica that missed the delete (versions-listing.ts). Collected by repair once no replica holds
 * the version (repair.ts `collectEndTombstones`).
 */
const VTOMB_PREFIX = 'vtomb/';
/**
 * An upload ended (completed or aborted), in `meta` under `utomb/<bucketId>/<uploadId>`, so that
 * a merged uploads listing does not show it from a replica that missed the end
 * (uploads-listing.ts). Its value holds the object key; collected by repair once no replica holds
 * the upload open.
 */
const UTOMB_PREFIX = 'utomb/';
/** How long a read waits for the replicas' answers. */
export const HEAD_MS_MAX = 5_000;
/** The longest one member's share of a repair may take before it is reported unreachable. */
const REPAIR_MS_MAX = 10 * 60_000;
const ZERO = Buffer.from([0]);
/** Locations of received records a node keeps for their manifests, per tenant. */
const PENDING_RECORDS_MAX = 100_000;
/** How many layouts a write is placed by before it gives up (each refusal names a newer one). */
const LAYOUT_ATTEMPTS = 4;
/** What a hint holds besides its write's own fields (closures, the queue's entry). */
const HINT_OVERHEAD_BYTES = 512;
/** A chunk id in hex (ids are 32 bytes; a shorter one is simply not found). */
const HEX = /^(?:[0-9a-f]{2}){1,64}$/;

export interface ClusterView {
  readonly nodeId: string;
  readonly nodeNum: number;
  readonly replicationFactor: number;
  /** Storage members, by id. */
  members(): ReadonlyMap<string, MemberRecord>;
  /** Whether this node reached etcd's quorum lately; writes are refused when it has not. */
  quorate(): boolean;
  /** Reads the membership and the layout again now (a repair places by the state just written). */
  refresh(): Promise<void>;
  /** The version of the layout `members()` comes from (0: none stored). */
  layoutVersion(): number;
  /**
   * Stores the membership's layout as the next version unless the current one says the same,
   * then reads it (a rebalance places by the newest layout, and publishes one where none is).
   */
  publishLayout(reason: string): Promise<void>;
  /** A bucket's replicas: its partition's in the layout's table (layout.ts). */
  replicasOfBucket(bucketId: number): string[];
  /** Its replicas under the layout before the current one that the current one left out. */
  previousReplicasOfBucket?(bucketId: number): string[];
  /** The highest leader epoch of `partition` this node has seen (leaders.ts). */
  epochOf(partition: number): number;
  /** Raises the epoch this node holds for `partition` to `epoch` (a write carried it). */
  noteEpoch(partition: number, epoch: number): void;
  /**
   * The epoch this node writes `partition` under as its leader; throws `stale_epoch` when it
   * does not lead it, `unavailable` when its own lease may be expiring (cluster-view.ts).
   */
  writeEpoch(partition: number): number;
  /** The leader of `partition` as last read, and whether it was live (undefined: never led). */
  leaderOf(partition: number): { nodeId: string; epoch: number; live: boolean } | undefined;
  /** A member's `cluster.listen` as last read, storage or not. */
  addressOf(nodeId: string): string | undefined;
  /** A member's state as last read, storage or not; undefined for an id etcd does not know. */
  stateOf(nodeId: string): MemberRecord['state'] | undefined;
  /** Every member's id as last read, storage or not (removed ones included). */
  memberIds(): string[];
}

/** The partition and epoch a replicated write carries, when it carries them. */
function ledBy(body: Record<string, unknown>): { partition: number; epoch: number } | undefined {
  const { partition, epoch } = body;
  if (typeof partition !== 'number' || typeof epoch !== 'number') return undefined;
  if (!Number.isInteger(partition) || partition < 0 || partition >= PARTITIONS)
    throw BadRequest(`partition ${partition} is out of range`);
  return { partition, epoch };
}

/** Member states whose replicated writes a replica refuses (see `Replicator.admit`). */
const FENCED_STATES: ReadonlySet<string> = new Set(['lost', 'removed']);

export interface Head {
  readonly seq: number;
  readonly deleted: boolean;
  /** The sequence of the last metadata change of the current version; 0 for none (repair). */
  readonly mseq?: number;
}

export function majorityOf(count: number): number {
  return Math.floor(count / 2) + 1;
}

export function stampKey(bucketId: number, seq: number, key: string): Buffer {
  return Buffer.concat([Buffer.from(`${STAMP_PREFIX}${bucketId}/${seq}/`), Buffer.from(key)]);
}

export function vtombKey(bucketId: number, versionId: string, key: string): Buffer {
  return Buffer.concat([Buffer.from(`${VTOMB_PREFIX}${bucketId}/${versionId}/`), Buffer.from(key)]);
}

/** Where a bucket's version (`vtomb/`) or upload (`utomb/`) tombstones are, in `meta`. */
function endTombPrefix(bucketId: number, kind: EndTombstone['kind']): Buffer {
  return Buffer.from(`${kind === 'version' ? VTOMB_PREFIX : UTOMB_PREFIX}${bucketId}/`);
}

export function tombKey(bucketId: number, key: string): Buffer {
  return Buffer.concat([Buffer.from(`${TOMB_PREFIX}${bucketId}/`), Buffer.from(key, 'utf8')]);
}

export class Replicator implements RepairPeer {
  private last = 0;
  private writer: SegmentWriter;
  /** The partition and epoch a write being sent carries (set by `toReplicas`, read by `call`). */
  private readonly sending = new AsyncLocalStorage<{ partition: number; epoch: number }>();
  /** Writes a replica missed after their majority answered, sent again (hints.ts). */
  readonly hints: Hints;
  /** The epoch each partition this node leads was last noted by a majority under (or being). */
  private readonly fencing = new Map<number, { epoch: number; done: Promise<void> }>();
  /** The metadata change of each object being applied here (see `inMetadataTurn`). */
  private readonly metadataTurns = new Map<string, Promise<void>>();

  constructor(
    private readonly local: LocalEngine,
    private readonly view: ClusterView,
    private readonly secret: Buffer,
    readonly log: Logger,
  ) {
    assert.ok(view.nodeNum >= 0 && view.nodeNum < NODE_NUMS, 'node number in range');
    this.hints = new Hints({
      addressOf: (nodeId) => {
        const member = this.view.members().get(nodeId);
        return member === undefined ? undefined : dataAddressOf(member.address);
      },
      fallBack: (_nodeId, tenantIds) => this.repairMissed(tenantIds),
      log,
    });
    this.registerMetrics(local.metrics);
    this.writer = new SegmentWriter({
      segmentsDir: local.segmentsDir,
      segmentBytesMax: local.settings.bytes('storage.segment_bytes_max'),
      directIo: local.settings.bool('storage.direct_io'),
      registry: {
        allocate: async () =>
          (
            (await local.runLocal('allocSegment', { ownerPid: process.pid })) as {
              segmentId: number;
            }
          ).segmentId,
        seal: async (segmentId, size) => {
          await local.runLocal('sealSegment', { segmentId, size });
        },
        // As a gateway's writer: the engine hears of a failed fdatasync, and holds its own
        // handle of a segment from before the first record (segment-syncer.ts).
        failed: async (segmentId) => {
          await local.segmentFailed?.(segmentId);
        },
        opened: async (segmentId) => {
          await local.segmentOpened?.(segmentId);
        },
      },
    });
  }

  get nodeId(): string {
    return this.view.nodeId;
  }

  /** The next sequence of this node (see the header). */
  nextSeq(): number {
    const floor = (Date.now() - EPOCH_MS) * PER_MS * NODE_NUMS + this.view.nodeNum;
    const next = Math.max(
      floor,
      this.last - (this.last % NODE_NUMS) + NODE_NUMS + this.view.nodeNum,
    );
    assert.ok(Number.isSafeInteger(next), 'sequence is a safe integer');
    this.last = next;
    return next;
  }

  observe(seq: number): void {
    if (seq > this.last) this.last = seq;
  }

  handlers(): Map<string, DataHandler> {
    return new Map<string, DataHandler>([
      ['/cluster/v1/data/records', this.admitted((body) => this.acceptRecords(body))],
      ['/cluster/v1/data/put', this.admitted((body) => this.acceptPut(body))],
      ['/cluster/v1/data/delete', this.admitted((body) => this.acceptDelete(body))],
      ['/cluster/v1/data/metadata', this.admitted((body) => this.acceptMetadata(body))],
      ['/cluster/v1/data/head', (_from, body) => Promise.resolve(this.headOf(body))],
      ['/cluster/v1/data/metadata-of', (_from, body) => Promise.resolve(this.metadataOf(body))],
      ['/cluster/v1/data/fetch', (_from, body) => Promise.resolve(this.manifestOf(body))],
      ['/cluster/v1/data/chunks', (_from, body) => this.recordsOf(body)],
      ['/cluster/v1/data/heads', (_from, body) => Promise.resolve(this.headsOf(body))],
      ['/cluster/v1/data/version', this.admitted((body) => this.acceptVersion(body))],
      [
        '/cluster/v1/data/versions-held',
        (_from, body) => Promise.resolve(this.versionsHeldHere(body)),
      ],
      ['/cluster/v1/data/holds-live', (_from, body) => Promise.resolve(this.liveHere(body))],
      ['/cluster/v1/data/repair', (_from, body) => this.repairHere(body)],
      ['/cluster/v1/data/reclaim', this.admitted(() => this.reclaimHere())],
      // A new leader's epoch (`fenceMajority`): `admitted` notes it, or refuses a lower one.
      ['/cluster/v1/data/epoch', this.admitted(() => Promise.resolve({}))],
    ]);
  }

  async close(): Promise<void> {
    this.hints.close();
    await this.writer.close();
  }

  /**
   * Fencing: a replicated write is taken only from a node that is still a member. One marked lost
   * (forceLost) or removed may come back still believing it holds replicas; its writes are
   * refused (`fenced`, 503), so nothing it changes after it was replaced reaches the others. An id this
   * node does not know yet (a join moments ago) makes it read the membership once more first.
   */
  admitted(
    handler: (body: Record<string, unknown>) => Promise<unknown>,
  ): (from: string, body: Record<string, unknown>) => Promise<unknown> {
    return async (from, body) => {
      if (this.view.stateOf(from) === undefined) await this.view.refresh();
      const state = this.view.stateOf(from);
      if (state === undefined || FENCED_STATES.has(state))
        throw Fenced(
          `node ${from} is ${state ?? 'not a member'}: its replicated writes are refused`,
        );
      const placedBy = body['layout'];
      if (typeof placedBy !== 'number') return handler(body);
      const led = ledBy(body);
      if (
        placedBy > this.view.layoutVersion() ||
        (led !== undefined && led.epoch > this.view.epochOf(led.partition))
      )
        await this.view.refresh();
      this.fence(from, placedBy, led);
      if (led !== undefined) this.view.noteEpoch(led.partition, led.epoch);
      const answer = await handler(body);
      // The layout or the leader may have changed while the write was applied: the sender must
      // then send it again (the write is kept: a repeat of it is a no-op here).
      this.fence(from, placedBy, led);
      return answer;
    };
  }

  private fence(
    from: string,
    placedBy: number,
    led: { partition: number; epoch: number } | undefined,
  ): void {
    this.fenceLayout(from, placedBy);
    if (led === undefined) return;
    const known = this.view.epochOf(led.partition);
    if (led.epoch < known) {
      this.fencedEpochs += 1;
      throw StaleEpoch(
        `node ${from} sent this write under epoch ${led.epoch} of partition ${led.partition}; ` +
          `this node has seen epoch ${known} (a new leader took the partition)`,
      );
    }
  }

  private fenceLayout(from: string, placedBy: number): void {
    const known = this.view.layoutVersion();
    if (placedBy < known) {
      this.fenced += 1;
      throw StaleLayout(
        `node ${from} placed this write by layout ${placedBy}; this node has seen layout ${known}`,
      );
    }
  }

  /** Writes this node refused as placed by a stale layout, and writes it placed again. */
  private fenced = 0;
  private replaced = 0;
  /** Writes this node refused as sent under a deposed leader's epoch. */
  private fencedEpochs = 0;

  /** Fencing's figures on the engine's `/metrics` (a router opened again takes them over). */
  private registerMetrics(registry: Registry): void {
    const figures: Array<[string, string, () => number]> = [
      [
        'lightwell_cluster_writes_fenced_total',
        'Replicated writes this node refused: placed by an older layout than it has seen',
        () => this.fenced,
      ],
      [
        'lightwell_cluster_writes_epoch_fenced_total',
        'Replicated writes this node refused: sent under a partition epoch below one it has seen',
        () => this.fencedEpochs,
      ],
      [
        'lightwell_cluster_writes_replaced_total',
        'Writes this node coordinated that a replica fenced, placed again by a newer layout',
        () => this.replaced,
      ],
    ];
    const hints = this.hints.figures;
    figures.push(
      [
        'lightwell_cluster_hints_delivered_total',
        'Replicated writes a replica missed after their majority answered, sent again and taken',
        () => hints.delivered,
      ],
      [
        'lightwell_cluster_hints_overflowed_total',
        'Missed replicated writes beyond the hints bound, left to a repair scan',
        () => hints.overflowed,
      ],
      [
        'lightwell_cluster_hints_given_up_total',
        'Missed replicated writes a replica refused when sent again, left to a repair scan',
        () => hints.givenUp,
      ],
      [
        'lightwell_cluster_hints_abandoned_total',
        'Hints dropped because their target is no longer a storage member',
        () => hints.abandoned,
      ],
      [
        'lightwell_cluster_hint_repair_scans_total',
        'Repair scans run for a replica whose hints overflowed or were given up',
        () => hints.repairScans,
      ],
      [
        'lightwell_cluster_reads_previous_layout_total',
        'Reads whose key only a replica of the previous layout held (not copied there yet)',
        () => this.fromPrevious,
      ],
      [
        'lightwell_cluster_records_kept_total',
        'Chunk records received that were not stored again, since this node held the chunk',
        () => this.recordsKept,
      ],
    );
    for (const [name, help, read] of figures) {
      registry.removeSingleMetric(name);
      counterOf(registry, name, help, read);
    }
    const held = this.hints;
    registry.removeSingleMetric('lightwell_cluster_hints_pending');
    new Gauge({
      name: 'lightwell_cluster_hints_pending',
      help: 'Replicated writes a replica missed, held to be sent again (hints)',
      registers: [registry],
      collect() {
        this.set(held.pending());
      },
    });
    const view = this.view;
    registry.removeSingleMetric('lightwell_cluster_layout_version');
    new Gauge({
      name: 'lightwell_cluster_layout_version',
      help: 'The version of the layout this node places writes by (0: none stored)',
      registers: [registry],
      collect() {
        this.set(view.layoutVersion());
      },
    });
  }

  // ---- the coordinator's side ---------------------------------------------------------------

  /** `putObject` here, then on a majority of the bucket's replicas. */
  async put(args: Record<string, unknown>): Promise<unknown> {
    this.requireQuorum();
    const seq = this.nextSeq();
    const now = Date.now();
    const version = (await this.local.runLocal('putObject', args, {
      reserved: { nextSeq: seq },
      now,
    })) as ObjectVersionRecord;
    const { tenant, bucket } = this.bucketOf(args);
    this.clearTomb(bucket.id, version.key, seq);
    const manifest = replicaPutArgs(args);
    await this.toReplicas(
      bucket,
      async (address) => {
        await this.sendRecords(address, tenant, unpackChunkRefs(version.chunks));
        await this.call(address, 'put', { args: manifest, seq, now });
      },
      [manifest, version.chunks],
    );
    return version;
  }

  /** `deleteObject` here, then on a majority of the bucket's replicas. */
  async delete(args: Record<string, unknown>): Promise<unknown> {
    this.requireQuorum();
    const seq = this.nextSeq();
    const now = Date.now();
    const { bucket } = this.bucketOf(args);
    const result = await this.local.runLocal('deleteObject', args, {
      reserved: { nextSeq: seq },
      now,
    });
    if (bucket.versioning === 'Unversioned' && args['versionId'] === undefined)
      await this.writeTomb(bucket.id, String(args['key']), seq);
    if (typeof args['versionId'] === 'string')
      await this.writeVtomb(bucket.id, String(args['key']), args['versionId'], seq);
    const replicated = {
      tenantId: args['tenantId'],
      bucket: args['bucket'],
      key: args['key'],
      ...(args['versionId'] === undefined ? {} : { versionId: args['versionId'] }),
    };
    await this.toReplicas(
      bucket,
      (address) =>
        this.call(address, 'delete', { args: replicated, seq, now }).then(() => undefined),
      replicated,
    );
    return result;
  }

  /**
   * A node cut off from etcd's quorum (the minority side of a partition) refuses a write before
   * it changes anything, so that no write it could not replicate is left behind on it.
   */
  requireQuorum(): void {
    if (!this.view.quorate())
      throw Unavailable('this node cannot reach a majority of the cluster; writes are refused');
  }

  /** Makes this node's copy of `key` as new as a majority of its replicas' (see the header). */
  async freshen(args: { tenantId: string; bucket: string; key: string }): Promise<void> {
    const { tenant, bucket } = this.bucketOf(args);
    const replicas = this.replicaIds(bucket);
    const self = this.view.nodeId;
    const own = this.localHead(bucket, args.key);
    const others = replicas.filter((id) => id !== self);
    const needed = majorityOf(replicas.length) - (replicas.includes(self) ? 1 : 0);
    const heads =
      needed <= 0 && others.length === 0
        ? new Map<string, Record<string, unknown>>()
        : await this.gather(others, needed, (address) =>
            this.call(address, 'head', args, HEAD_MS_MAX),
          );
    let best: { address: string; head: Head } | undefined;
    let metadata: { address: string; mseq: number } | undefined;
    const stamp = own.seq > 0 && !own.deleted ? this.stampOf(bucket.id, args.key, own.seq) : 0;
    for (const [address, answer] of heads) {
      const head = answer as unknown as Head;
      if (head.seq > (best?.head.seq ?? own.seq)) best = { address, head };
      const mseq = head.seq === own.seq && !head.deleted ? (head.mseq ?? 0) : 0;
      if (mseq > (metadata?.mseq ?? stamp)) metadata = { address, mseq };
    }
    // Nothing of the key in the current set: a replica the last layout change left out may hold
    // it still, until a rebalance has copied it (two live layouts, docs/cluster.md §9).
    const none = [...heads.values()].every((answer) => (answer as unknown as Head).seq === 0);
    if (best === undefined && own.seq === 0 && none) best = await this.previousHead(bucket, args);
    // The same version, with a tag, retention or legal-hold change this node missed.
    if (best === undefined && metadata !== undefined)
      await this.acceptMetadata(await this.call(metadata.address, 'metadata-of', args));
    if (best === undefined) return;
    this.observe(best.head.seq);
    if (best.head.deleted) {
      await this.applyDelete({ ...args }, best.head.seq, Date.now());
      return;
    }
    await this.pull(best.address, tenant, args);
  }

  /** The newest head of `key` among the bucket's replicas of the previous layout, if any. */
  private async previousHead(
    bucket: BucketRecord,
    args: { tenantId: string; bucket: string; key: string },
  ): Promise<{ address: string; head: Head } | undefined> {
    // A member marked lost or removed is not asked: its copy may predate deletes it missed.
    const ids = (this.view.previousReplicasOfBucket?.(bucket.id) ?? []).filter((id) => {
      const state = this.view.stateOf(id);
      return id !== this.view.nodeId && state !== undefined && !FENCED_STATES.has(state);
    });
    const answers = await Promise.all(
      ids.map(async (id) => {
        const member = this.view.addressOf(id);
        if (member === undefined) return undefined;
        const address = dataAddressOf(member);
        const head = await this.call(address, 'head', args, HEAD_MS_MAX).catch(() => undefined);
        return head === undefined ? undefined : { address, head: head as unknown as Head };
      }),
    );
    let best: { address: string; head: Head } | undefined;
    for (const answer of answers)
      if (answer !== undefined && answer.head.seq > (best?.head.seq ?? 0)) best = answer;
    if (best !== undefined) this.fromPrevious += 1;
    return best;
  }

  /** Reads that found their key only on a replica of the previous layout (`previousHead`). */
  private fromPrevious = 0;

  async pull(
    address: string,
    tenant: TenantRecord,
    args: { tenantId: string; bucket: string; key: string },
  ): Promise<void> {
    const fetched = await this.call(address, 'fetch', args);
    const chunks = (fetched['chunks'] as Array<{ id: Buffer; plainLength: number }>).map(
      (chunk) => ({ id: Buffer.from(chunk.id), plainLength: chunk.plainLength }),
    );
    const locations = new Map<string, ManifestChunk['location']>();
    for (let start = 0; start < chunks.length;) {
      const answer = await this.call(address, 'chunks', {
        tenantNum: tenant.num,
        ids: chunks.slice(start).map((chunk) => chunk.id),
      });
      const records = answer['records'] as Buffer[];
      if (records.length === 0) throw Unavailable(`node at ${address} sent no chunk records`);
      for (const [id, location] of await this.storeRecords(tenant.num, records))
        locations.set(id, location);
      start += records.length;
    }
    const manifest = {
      ...(fetched['args'] as Record<string, unknown>),
      chunks: chunks.map((chunk) => ({
        ...chunk,
        location: locations.get(chunk.id.toString('hex')),
      })),
    };
    await this.applyPut(manifest, fetched['seq'] as number, fetched['now'] as number);
  }

  /**
   * Runs `send` to every other replica; resolves once a majority of the set holds the write. A
   * replica that refuses it as placed by a stale layout makes this node read the layout and send
   * it to the new set (see the header), also when a majority of the old set took it.
   */
  /**
   * Sends a write to a majority of the bucket's replicas (placed again when refused as stale);
   * `held` is what `send` keeps in memory (its manifest, ids), which a hint for a replica that
   * missed it is counted at (hints.ts bounds them by bytes).
   */
  async toReplicas(
    bucket: BucketRecord,
    send: (address: string) => Promise<void>,
    held?: unknown,
  ): Promise<void> {
    const partition = partitionOf(bucket.id);
    for (let attempt = 1; ; attempt += 1) {
      const placedBy = this.view.layoutVersion();
      const epoch = this.leaderEpoch(partition);
      const seen = { stale: false };
      const sendOnce = async (address: string): Promise<void> => {
        try {
          await send(address);
        } catch (error) {
          const code = errorCode(error);
          if (code === 'stale_layout' || code === 'stale_epoch') seen.stale = true;
          throw error;
        }
      };
      // Replicas that refuse the epoch round as placed by a stale layout or epoch are the same
      // refusal as the write's own: read the layout and place it again.
      const failure = await this.fenceMajority(bucket, partition, epoch)
        .catch((error: unknown) => {
          const code = errorCode(error);
          if (code === 'stale_layout' || code === 'stale_epoch') seen.stale = true;
          throw error;
        })
        .then(() =>
          this.sending.run({ partition, epoch }, () => this.toReplicaSet(bucket, sendOnce, held)),
        )
        .then(
          () => undefined,
          (error: unknown) => error as Error,
        );
      if (!seen.stale) {
        if (failure !== undefined) throw failure;
        return;
      }
      await this.view.refresh();
      const newer = this.view.layoutVersion() > placedBy || this.view.epochOf(partition) > epoch;
      if (attempt >= LAYOUT_ATTEMPTS || !newer)
        throw Unavailable(
          `the write was sent under layout ${placedBy} and epoch ${epoch} of partition ` +
            `${partition}, which replicas refused as stale, and newer ones could not be read ` +
            `(this node has layout ${this.view.layoutVersion()}, epoch ` +
            `${this.view.epochOf(partition)})`,
        );
      this.replaced += 1;
      this.log.info(
        { from: placedBy, to: this.view.layoutVersion(), bucketId: bucket.id, partition, epoch },
        'a write sent under a stale layout or epoch is sent again',
      );
    }
  }

  /**
   * The epoch this node sends a write of `partition` under: its own as the partition's leader
   * (forwarding.ts checked it leads before the write ran here). A node deposed meanwhile (a
   * replica refused the epoch, and etcd names another leader) answers `unavailable`, not
   * `stale_epoch`: the write is made here and maybe on some replicas, so it must not be sent to
   * the new leader as one that ran nothing.
   */
  private leaderEpoch(partition: number): number {
    try {
      return this.view.writeEpoch(partition);
    } catch (error) {
      if (errorCode(error) !== 'stale_epoch') throw error;
      throw Unavailable(
        `this node stopped leading partition ${partition} while it sent a write, which may or ` +
          'may not have been made; read the object, or retry',
        {},
        { cause: error },
      );
    }
  }

  /**
   * Before its first write under an epoch, a leader has a majority of the partition's replicas
   * note that epoch (`/cluster/v1/data/epoch`), so that from then on every majority a deposed
   * leader could gather holds one replica that refuses it (docs/cluster.md §8, "Strict single
   * writer"). Concurrent writes share one round; a failed round is tried again by the next write.
   */
  private async fenceMajority(
    bucket: BucketRecord,
    partition: number,
    epoch: number,
  ): Promise<void> {
    if (epoch === 0) return;
    const held = this.fencing.get(partition);
    if (held !== undefined && held.epoch >= epoch) return held.done;
    let stale: unknown;
    const note = (address: string): Promise<void> =>
      this.call(address, 'epoch', {}).then(
        () => {},
        (error: unknown) => {
          const code = errorCode(error);
          if (code === 'stale_layout' || code === 'stale_epoch') stale = error;
          throw error;
        },
      );
    const done = this.sending
      .run({ partition, epoch }, () => this.toReplicaSet(bucket, note, null, false))
      .catch((error: unknown) => {
        if (this.fencing.get(partition)?.done === done) this.fencing.delete(partition);
        // A majority missed because a replica has seen a newer layout or epoch: say that, so
        // the write is placed again (toReplicas) rather than refused.
        throw stale ?? error;
      });
    this.fencing.set(partition, { epoch, done });
    return done;
  }

  private async toReplicaSet(
    bucket: BucketRecord,
    send: (address: string) => Promise<void>,
    held: unknown,
    withHints = true,
  ): Promise<void> {
    const replicas = this.replicaIds(bucket);
    const self = this.view.nodeId;
    const needed = majorityOf(replicas.length) - (replicas.includes(self) ? 1 : 0);
    const others = replicas.filter((id) => id !== self);
    const sends = new Map<string, Promise<void>>();
    await this.gather(others, needed, async (address) => {
      const sent = send(address);
      sends.set(address, sent);
      await sent;
      return {};
    });
    if (!withHints) return;
    // The majority holds the write: a replica whose send failed, or fails later, gets it again
    // from this node's hints (hints.ts), under the partition's epoch as it is when it is sent.
    const members = this.view.members();
    const partition = partitionOf(bucket.id);
    const hinted = (address: string): Promise<void> =>
      this.sending.run({ partition, epoch: this.view.epochOf(partition) }, () => send(address));
    let bytes: number | undefined;
    const hintBytes = (): number => (bytes ??= HINT_OVERHEAD_BYTES + pack(held ?? null).length);
    for (const id of others) {
      const address = members.get(id)?.address;
      const sent = address === undefined ? undefined : sends.get(dataAddressOf(address));
      // Outside the write's partition and epoch: the hint's timers, and the repair scan they
      // may start, must not carry this write's context into their own sends.
      sent?.catch((error: unknown) =>
        this.sending.exit(() =>
          this.hints.add(
            id,
            { tenantId: bucket.tenantId, send: hinted, bytes: hintBytes() },
            error,
          ),
        ),
      );
    }
  }

  /**
   * Calls `each` on the members `ids` at once; resolves with the answers once `needed` of them
   * answered (the others go on, their failures logged), or fails once that cannot happen.
   */
  gather(
    ids: readonly string[],
    needed: number,
    each: (address: string) => Promise<Record<string, unknown>>,
  ): Promise<Map<string, Record<string, unknown>>> {
    const answers = new Map<string, Record<string, unknown>>();
    if (needed <= 0) {
      for (const id of ids) void this.tryOne(id, each, answers);
      return Promise.resolve(answers);
    }
    return new Promise((resolve, reject) => {
      let failed = 0;
      const errors: string[] = [];
      for (const id of ids) {
        this.tryOne(id, each, answers).then(
          () => {
            if (answers.size === needed) resolve(new Map(answers));
          },
          (error: unknown) => {
            failed += 1;
            errors.push(`${id}: ${(error as Error).message}`);
            if (ids.length - failed < needed)
              reject(
                Unavailable(
                  `a majority of the replicas did not answer (${needed} more needed): ` +
                    errors.join('; '),
                ),
              );
          },
        );
      }
      if (ids.length < needed) reject(Unavailable('too few replicas are members'));
    });
  }

  private async tryOne(
    id: string,
    each: (address: string) => Promise<Record<string, unknown>>,
    answers: Map<string, Record<string, unknown>>,
  ): Promise<void> {
    const member = this.view.members().get(id);
    if (member === undefined) throw Unavailable(`member ${id} is gone`);
    try {
      const address = dataAddressOf(member.address);
      answers.set(address, await each(address));
    } catch (error) {
      this.log.warn({ err: error, nodeId: id }, 'replica did not take the write or answer');
      throw error;
    }
  }

  /**
   * Sends the chunk records of `refs` in batches of DATA_BATCH_BYTES. A ref with a location (a
   * body stored here but not committed: a forwarded write, forwarding.ts) is read from there;
   * any other from this node's index.
   */
  async sendRecords(
    address: string,
    tenant: TenantRecord,
    refs: ReadonlyArray<{ id: Buffer; location?: ManifestChunk['location'] }>,
  ): Promise<number> {
    let batch: Buffer[] = [];
    let bytes = 0;
    let total = 0;
    for (const ref of refs) {
      const record = await this.readRecord(tenant.num, ref.id, ref.location);
      total += record.length;
      if (bytes + record.length > DATA_BATCH_BYTES && batch.length > 0) {
        await this.call(address, 'records', { tenantNum: tenant.num, records: batch });
        batch = [];
        bytes = 0;
      }
      batch.push(record);
      bytes += record.length;
    }
    if (batch.length > 0)
      await this.call(address, 'records', { tenantNum: tenant.num, records: batch });
    return total;
  }

  // ---- repair (repair.ts) -------------------------------------------------------------------

  get store(): LocalEngine['store'] {
    return this.local.store;
  }

  otherReplicas(bucket: BucketRecord): string[] {
    const members = this.view.members();
    return this.replicaIds(bucket)
      .filter((id) => id !== this.view.nodeId)
      .map((id) => dataAddressOf((members.get(id) as MemberRecord).address));
  }

  /**
   * Every other member that may hold copies: the storage members (replicas under the layout, old
   * replicas not reclaimed yet, members whose reads fetched copies) and the drained ones (a drain
   * whose reclaim failed leaves its copies). Lost and removed members are out: their copies are
   * never read again (a lost member coming back is fenced, and must be wiped).
   */
  holders(_bucket: BucketRecord): string[] {
    const ids = new Set(this.view.members().keys());
    for (const id of this.view.memberIds()) if (this.view.stateOf(id) === 'drained') ids.add(id);
    ids.delete(this.view.nodeId);
    return [...ids].flatMap((id) => {
      const address = this.view.addressOf(id);
      return address === undefined ? [] : [dataAddressOf(address)];
    });
  }

  async heads(
    address: string,
    args: { tenantId: string; bucket: string; keys: string[] },
  ): Promise<Head[]> {
    return (await this.call(address, 'heads', args))['heads'] as Head[];
  }

  async versionsHeld(
    address: string,
    args: {
      tenantId: string;
      bucket: string;
      items: ReadonlyArray<{ key: string; seq: number; versionId: string }>;
    },
  ): Promise<boolean[]> {
    return (await this.call(address, 'versions-held', args))['held'] as boolean[];
  }

  async copyOldVersion(
    address: string,
    tenant: TenantRecord,
    bucket: BucketRecord,
    version: ObjectVersionRecord,
  ): Promise<number> {
    const bytes =
      version.deleteMarker === true
        ? 0
        : await this.sendRecords(address, tenant, unpackChunkRefs(version.chunks));
    const mseq = this.stampOf(bucket.id, version.key, version.seq);
    await this.call(address, 'version', {
      tenantId: tenant.id,
      bucket: bucket.name,
      version,
      ...(mseq > 0 ? { mseq } : {}),
    });
    return bytes;
  }

  async copyVersion(
    address: string,
    tenant: TenantRecord,
    bucket: BucketRecord,
    version: ObjectVersionRecord,
  ): Promise<number> {
    const chunks = unpackChunkRefs(version.chunks);
    const bytes = await this.sendRecords(address, tenant, chunks);
    const args = { ...putArgsOf(tenant.id, bucket.name, version), chunks };
    const mseq = this.stampOf(bucket.id, version.key, version.seq);
    await this.call(address, 'put', {
      args,
      seq: version.seq,
      now: version.lastModified,
      ...(mseq > 0 ? { mseq } : {}),
    });
    return bytes;
  }

  // ---- metadata changes (tags, retention, legal hold) ---------------------------------------

  /** The sequence of the last metadata change of version `seq` of `key` here; 0 for none. */
  stampOf(bucketId: number, key: string, seq: number): number {
    return this.local.store.get<{ mseq: number }>(DB.meta, stampKey(bucketId, seq, key))?.mseq ?? 0;
  }

  /**
   * Records that version `seq` of `key` has the metadata of change `mseq` (unless it has a newer
   * one): a metadata change keeps the version's sequence, so this is what tells a replica that
   * missed one (it was down) from one that holds it. A stamp stays while the version is held
   * here; repair drops it once the version is gone (repair.ts `collectEndTombstones`).
   */
  async stampMetadata(bucketId: number, key: string, seq: number, mseq: number): Promise<void> {
    this.observe(mseq);
    const at = stampKey(bucketId, seq, key);
    await this.local.commit(() =>
      (this.local.store.get<{ mseq: number }>(DB.meta, at)?.mseq ?? 0) < mseq
        ? [{ db: DB.meta, key: at, value: { mseq } }]
        : [],
    );
  }

  /**
   * Runs `apply` once every metadata change of `key` that arrived here before it is done. A
   * change carries its sequence (`mseq`), and a replica applies it only if its stamp is older:
   * without the turn, a late change (a hint, a repair) and a newer one could both pass that
   * check and land in the wrong order, leaving the older value under the newer stamp.
   */
  async inMetadataTurn<T>(bucketId: number, key: string, apply: () => Promise<T>): Promise<T> {
    const at = `${String(bucketId)}/${key}`;
    const before = this.metadataTurns.get(at) ?? Promise.resolve();
    let done!: () => void;
    const turn = before.then(() => new Promise<void>((resolve) => (done = resolve)));
    this.metadataTurns.set(at, turn);
    await before;
    try {
      return await apply();
    } finally {
      done();
      if (this.metadataTurns.get(at) === turn) this.metadataTurns.delete(at);
    }
  }

  /** Sends `version`'s tags, retention and legal hold as of change `mseq` to a replica. */
  async sendMetadata(
    address: string,
    bucket: BucketRecord,
    version: ObjectVersionRecord,
    mseq: number,
  ): Promise<void> {
    await this.call(address, 'metadata', metadataMessage(bucket, version, mseq));
  }

  /**
   * A replica's side of `sendMetadata`: the version's metadata becomes the sender's, unless this
   * node holds a change as new. The rules were the coordinator's to check (a retention only
   * shortened under a governance bypass, say); this node takes their outcome, so retention is
   * set with the bypass. Answers whether this node holds that version.
   */
  private async acceptMetadata(body: Record<string, unknown>): Promise<Record<string, unknown>> {
    const { args, versionId, seq, mseq, tags, retention, legalHold } = body as {
      args?: Record<string, unknown>;
      versionId?: unknown;
      seq?: unknown;
      mseq?: unknown;
      tags?: unknown;
      retention?: { mode: unknown; retainUntil: unknown };
      legalHold?: unknown;
    };
    if (
      args === undefined ||
      typeof versionId !== 'string' ||
      typeof seq !== 'number' ||
      typeof mseq !== 'number' ||
      !Array.isArray(tags)
    )
      throw BadRequest('metadata takes {args, versionId, seq, mseq, tags, retention?, legalHold}');
    const { bucket } = this.bucketOf(args);
    const key = String(args['key']);
    return this.inMetadataTurn(bucket.id, key, async () => {
      this.local.store.refresh();
      return this.applyMetadata(bucket, key, { versionId, seq, mseq, tags, retention, legalHold });
    });
  }

  private async applyMetadata(
    bucket: BucketRecord,
    key: string,
    change: {
      versionId: string;
      seq: number;
      mseq: number;
      tags: unknown[];
      retention: { mode: unknown; retainUntil: unknown } | undefined;
      legalHold: unknown;
    },
  ): Promise<Record<string, unknown>> {
    const { versionId, seq, mseq, tags, retention, legalHold } = change;
    const held = findVersionIn(this.local.store, bucket.id, key, versionId);
    if (held === undefined || held.seq !== seq) return { applied: false };
    if (this.stampOf(bucket.id, key, seq) >= mseq) return { applied: true };
    const target = { tenantId: bucket.tenantId, bucket: bucket.name, key, versionId };
    const now = Date.now();
    await this.local.runLocal('putObjectTags', { ...target, tags }, { now });
    if (bucket.objectLock) {
      await this.local.runLocal(
        'putRetention',
        retention === undefined
          ? { ...target, mode: null, bypassGovernance: true }
          : { ...target, ...retention, bypassGovernance: true },
        { now },
      );
      await this.local.runLocal('putLegalHold', { ...target, status: legalHold }, { now });
    }
    await this.stampMetadata(bucket.id, key, seq, mseq);
    return { applied: true };
  }

  async sendDelete(
    address: string,
    bucket: BucketRecord,
    key: string,
    seq: number,
    time: number,
  ): Promise<void> {
    const args = { tenantId: bucket.tenantId, bucket: bucket.name, key };
    await this.call(address, 'delete', { args, seq, now: time });
  }

  tombstones(
    bucket: BucketRecord,
    after: string | undefined,
    limit: number,
  ): Array<{ key: string; seq: number }> {
    const prefix = tombKey(bucket.id, '');
    const start = after === undefined ? prefix : Buffer.concat([tombKey(bucket.id, after), ZERO]);
    const found: Array<{ key: string; seq: number }> = [];
    for (const { key, value } of this.local.store.range<{ seq: number }>(DB.meta, {
      start,
      end: Buffer.concat([prefix, Buffer.from([0xff])]),
      limit,
    }))
      found.push({ key: key.subarray(prefix.length).toString('utf8'), seq: value.seq });
    return found;
  }

  timeOfSeq(seq: number): number {
    return EPOCH_MS + Math.floor(seq / (PER_MS * NODE_NUMS));
  }

  async dropTombstones(
    bucket: BucketRecord,
    tombs: ReadonlyArray<{ key: string; seq: number }>,
  ): Promise<void> {
    await this.local.commit(() =>
      tombs
        .filter(
          (tomb) =>
            this.local.store.get<{ seq: number }>(DB.meta, tombKey(bucket.id, tomb.key))?.seq ===
            tomb.seq,
        )
        .map((tomb) => ({ db: DB.meta, key: tombKey(bucket.id, tomb.key) })),
    );
  }

  /**
   * For each `{key, seq}`, whether this node needs no copy of that version: it holds it, deleted
   * it by its id, or (a null version) holds a newer null version of the key.
   */
  private versionsHeldHere(body: Record<string, unknown>): Record<string, unknown> {
    const { bucket } = this.bucketOf(body);
    const items = body['items'];
    if (!Array.isArray(items) || items.length > REPAIR_PAGE_KEYS)
      throw BadRequest(`versions-held takes at most ${REPAIR_PAGE_KEYS} {key, seq, versionId}`);
    const { store } = this.local;
    store.refresh();
    return {
      held: (items as Array<{ key: unknown; seq: unknown; versionId: unknown }>).map((item) => {
        const key = String(item.key);
        const seq = Number(item.seq);
        const versionId = String(item.versionId);
        if (store.has(DB.versions, versionKey(bucket.id, key, seq))) return true;
        if (this.deletedSince(bucket, key, versionId) >= seq) return true;
        if (versionId !== 'null') return false;
        return (findVersionIn(store, bucket.id, key, 'null')?.seq ?? 0) > seq;
      }),
    };
  }

  /** A version another replica holds and this node lacks, with its id, sequence and time. */
  private async acceptVersion(body: Record<string, unknown>): Promise<Record<string, unknown>> {
    const version = body['version'] as ObjectVersionRecord | undefined;
    if (version === undefined || typeof version !== 'object' || typeof version.seq !== 'number')
      throw BadRequest('version takes {tenantId, bucket, version}');
    const { tenant, bucket } = this.bucketOf(body);
    this.observe(version.seq);
    if (this.deletedSince(bucket, version.key, version.versionId) >= version.seq)
      return { written: false };
    const chunks =
      version.deleteMarker === true
        ? []
        : this.located(tenant.num, unpackChunkRefs(Buffer.from(version.chunks)));
    const written = await this.local
      .runLocal('writeReplicaVersion', {
        tenantId: tenant.id,
        bucket: bucket.name,
        version: { ...version, chunks: Buffer.from(version.chunks) },
        chunks,
      })
      .finally(() => this.forget(tenant.num, chunks));
    const mseq = body['mseq'];
    if (typeof mseq === 'number')
      await this.stampMetadata(bucket.id, version.key, version.seq, mseq);
    return written as Record<string, unknown>;
  }

  private headsOf(body: Record<string, unknown>): Record<string, unknown> {
    const { bucket } = this.bucketOf(body);
    const keys = body['keys'];
    if (!Array.isArray(keys) || keys.length > REPAIR_PAGE_KEYS)
      throw BadRequest(`heads takes at most ${REPAIR_PAGE_KEYS} keys`);
    return {
      heads: keys.map((key) => {
        const head = this.localHead(bucket, String(key));
        return { ...head, mseq: this.stampOf(bucket.id, String(key), head.seq) };
      }),
    };
  }

  /**
   * A repair of one tenant (or bucket) by this node, from its own copies; then, unless a dry run,
   * the space of the buckets it is no replica of any more is reclaimed (reclaim.ts).
   */
  private async repairHere(
    body: Record<string, unknown>,
  ): Promise<RepairCounts & { reclaimed?: ReclaimCounts }> {
    await this.view.refresh();
    const tenantId = String(body['tenantId']);
    const tenant = this.local.store.get<TenantRecord>(DB.tenants, tenantKey(tenantId));
    if (tenant === undefined) throw NotFound(`tenant ${tenantId} is not known on this node`);
    const bucket = typeof body['bucket'] === 'string' ? body['bucket'] : undefined;
    const dryRun = body['dryRun'] === true;
    const counts = await repairTenant(this, tenant, bucket, dryRun);
    // A drain's data move reclaims nothing: the drained member reclaims once drained, and
    // reports it (membership.ts).
    if (dryRun || body['reclaim'] === false) return counts;
    return { ...counts, reclaimed: await reclaimTenant(this.reclaimer(), tenant, bucket) };
  }

  /**
   * The repair scan of tenants (undefined: every tenant) whose writes a replica missed and whose
   * hints were not all delivered (hints.ts): it runs once the replica took this node's sends
   * again. A replica that still does not answer it (counted, logged) is left to the next
   * rebalance, its catch-up at start and its reads: running a whole tenant's scan again and
   * again while any member is down would cost more than it saves.
   */
  private async repairMissed(tenantIds: ReadonlySet<string> | undefined): Promise<void> {
    await this.view.refresh();
    for (const { value: tenant } of this.local.store.range<TenantRecord>(DB.tenants, {})) {
      if (tenant.state === 'deleted' || (tenantIds !== undefined && !tenantIds.has(tenant.id)))
        continue;
      const counts = await repairTenant(this, tenant, undefined, false);
      this.log.info({ tenantId: tenant.id, counts }, 'repair scan for missed hints');
    }
  }

  /** Reclaims this node's copies of every tenant's buckets it is no replica of (reclaim.ts). */
  private async reclaimHere(): Promise<ReclaimCounts> {
    await this.view.refresh();
    const counts = emptyReclaimCounts();
    for (const { value: tenant } of this.local.store.range<TenantRecord>(DB.tenants, {})) {
      if (tenant.state === 'deleted') continue;
      const reclaimed = await reclaimTenant(this.reclaimer(), tenant);
      for (const field of Object.keys(counts) as Array<keyof ReclaimCounts>)
        counts[field] += reclaimed[field];
    }
    this.log.info({ counts }, 'space of copies this node no longer holds reclaimed');
    return counts;
  }

  /** Has member `nodeId` (this node, or another: a drained one) reclaim what it no longer holds. */
  async reclaimOn(nodeId: string): Promise<Record<string, unknown>> {
    if (nodeId === this.view.nodeId) return { ...(await this.reclaimHere()) };
    await this.view.refresh();
    const address = this.view.addressOf(nodeId);
    if (address === undefined) throw NotFound(`member ${nodeId} is not known`);
    return this.call(dataAddressOf(address), 'reclaim', {}, REPAIR_MS_MAX);
  }

  private reclaimer(): ReclaimPeer {
    return {
      log: this.log,
      store: this.local.store,
      heads: (address, args) => this.heads(address, args),
      tombstones: (bucket, after, limit) => this.tombstones(bucket, after, limit),
      dropTombstones: (bucket, tombs) => this.dropTombstones(bucket, tombs),
      replicaSet: (bucket) => {
        const ids = this.replicaIds(bucket);
        return {
          self: ids.includes(this.view.nodeId),
          addresses: this.otherReplicas(bucket),
          needed: majorityOf(ids.length),
        };
      },
      dropKeys: async (tenant, bucket, keys) =>
        (await this.local.runLocal('dropReplicaKeys', {
          tenantId: tenant.id,
          bucket: bucket.name,
          keys,
        })) as DropReplicaResult,
    };
  }

  /**
   * A node that starts asks every other member to push what this node missed while it was down
   * (each of them repairs every tenant it holds). In the background; failures are logged.
   */
  async catchUp(): Promise<void> {
    const tenants = [...this.local.store.range<TenantRecord>(DB.tenants, {})]
      .map((entry) => entry.value)
      .filter((tenant) => tenant.state !== 'deleted');
    const others = [...this.view.members().values()].filter(
      (member) => member.id !== this.view.nodeId,
    );
    for (const tenant of tenants)
      for (const member of others) {
        const args = { tenantId: tenant.id, dryRun: false };
        await this.call(dataAddressOf(member.address), 'repair', args, REPAIR_MS_MAX).then(
          (counts) =>
            this.log.info({ nodeId: member.id, tenantId: tenant.id, counts }, 'caught up'),
          (error: unknown) =>
            this.log.warn({ err: error, nodeId: member.id }, 'not caught up from a member'),
        );
      }
  }

  /**
   * Repairs a tenant (or one bucket) on every storage member: each pushes what the other
   * replicas lack. Answers the counts summed, and each member's.
   */
  async repair(args: {
    tenantId: string;
    bucket?: string;
    dryRun: boolean;
    corrupt?: string[];
    reclaim?: boolean;
  }): Promise<{
    counts: RepairCounts;
    nodes: Record<string, unknown>;
    chunks?: { repaired: number; unrepaired: number };
  }> {
    const chunks =
      args.corrupt === undefined || args.corrupt.length === 0 || args.dryRun
        ? undefined
        : await this.repairChunks(args.tenantId, args.corrupt);
    if (args.dryRun) await this.view.refresh();
    else await this.view.publishLayout(`rebalance of tenant ${args.tenantId}`);
    const counts = emptyCounts();
    const nodes: Record<string, unknown> = {};
    const started = performance.now();
    await Promise.all(
      [...this.view.members().values()].map(async (member) => {
        try {
          const result =
            member.id === this.view.nodeId
              ? await this.repairHere(args)
              : ((await this.call(
                  dataAddressOf(member.address),
                  'repair',
                  args,
                  REPAIR_MS_MAX,
                )) as unknown as RepairCounts);
          addCounts(counts, result);
          nodes[member.id] = result;
        } catch (error) {
          nodes[member.id] = { error: (error as Error).message };
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    return { counts, nodes: { ...nodes, seconds }, ...(chunks === undefined ? {} : { chunks }) };
  }

  /**
   * Replaces this node's corrupt chunk records (a scrub found them: a flipped bit, a torn write)
   * with a good copy from another member: the first that has the chunk and whose copy verifies
   * (its reader checks it, and so does this node before it appends it and fsyncs). The chunk's
   * record then points at the new copy; its references are untouched.
   */
  async repairChunks(
    tenantId: string,
    hexIds: readonly string[],
  ): Promise<{ repaired: number; unrepaired: number }> {
    const tenant = this.local.store.get<TenantRecord>(DB.tenants, tenantKey(tenantId));
    if (tenant === undefined) throw NotFound(`tenant ${tenantId} is not known on this node`);
    const others = [...this.view.members().values()].filter(
      (member) => member.id !== this.view.nodeId,
    );
    let repaired = 0;
    for (const hex of new Set(hexIds)) {
      const id = Buffer.from(hex, 'hex');
      for (const member of others) {
        const fixed = await this.repairChunk(dataAddressOf(member.address), tenant, id).catch(
          (error: unknown) => {
            this.log.warn({ err: error, nodeId: member.id }, 'no good copy of a chunk there');
            return false;
          },
        );
        if (fixed) {
          repaired += 1;
          break;
        }
      }
    }
    return { repaired, unrepaired: new Set(hexIds).size - repaired };
  }

  /**
   * A read on this node met a corrupt copy of a chunk (its checksum failed): the copy is replaced
   * with a good one from another member now, so that the read goes on with the right bytes from
   * this node's index. Reads of one chunk at once share one repair.
   */
  repairChunkOf(args: { tenantNum: number; chunkId: string }): Promise<{ repaired: boolean }> {
    const { tenantNum, chunkId } = args;
    if (!Number.isSafeInteger(tenantNum) || typeof chunkId !== 'string' || !HEX.test(chunkId))
      throw BadRequest('clusterRepairChunk takes {tenantNum, chunkId in hex}');
    const id = `${tenantNum}/${chunkId}`;
    const running = this.chunkRepairs.get(id);
    if (running !== undefined) return running;
    const repair = (async () => {
      let tenant: TenantRecord | undefined;
      for (const { value } of this.local.store.range<TenantRecord>(DB.tenants, {}))
        if (value.num === tenantNum) tenant = value;
      if (tenant === undefined) return { repaired: false };
      const { repaired } = await this.repairChunks(tenant.id, [chunkId]);
      return { repaired: repaired > 0 };
    })().finally(() => this.chunkRepairs.delete(id));
    this.chunkRepairs.set(id, repair);
    return repair;
  }

  private readonly chunkRepairs = new Map<string, Promise<{ repaired: boolean }>>();

  private async repairChunk(address: string, tenant: TenantRecord, id: Buffer): Promise<boolean> {
    const answer = await this.call(address, 'chunks', { tenantNum: tenant.num, ids: [id] });
    const record = (answer['records'] as Buffer[])[0];
    if (record === undefined) return false;
    const location = (await this.storeRecords(tenant.num, [record], true)).get(id.toString('hex'));
    this.forget(tenant.num, [{ id }]);
    if (location === undefined) return false;
    const key = chunkKey(tenant.num, id);
    await this.local.commit(() => {
      const chunk = this.local.store.get<ChunkRecord>(DB.chunks, key);
      if (chunk === undefined) return [];
      return [{ db: DB.chunks, key, value: { ...chunk, ...location } }];
    });
    this.log.warn({ tenantId: tenant.id, chunkId: id.toString('hex') }, 'corrupt chunk repaired');
    return true;
  }

  // ---- the replica's side -------------------------------------------------------------------

  /** Verifies and stores chunk records; answers where they are now. */
  private async acceptRecords(body: Record<string, unknown>): Promise<Record<string, unknown>> {
    const tenantNum = body['tenantNum'];
    const records = body['records'];
    if (typeof tenantNum !== 'number' || !Array.isArray(records))
      throw BadRequest('records takes {tenantNum, records}');
    const stored = await this.storeRecords(tenantNum, records as Buffer[]);
    return { stored: stored.size };
  }

  /**
   * Verifies and appends chunk records; answers where each appended one is. A record of a chunk
   * this node already holds is not appended again (it would be bytes nothing references, until
   * compaction): one the index holds live is deduplicated by the commit as a local write's is,
   * and one held here uncommitted (the body of a write this node forwarded, `holdOwn`) is
   * answered at that place, so the commit references the copy this node stored first. `replace`
   * appends every record (a repair of a corrupt copy).
   */
  private async storeRecords(
    tenantNum: number,
    records: readonly Buffer[],
    replace = false,
  ): Promise<Map<string, ManifestChunk['location']>> {
    const locations = new Map<string, ManifestChunk['location']>();
    const appended = [];
    const held = this.pending.get(tenantNum);
    for (const raw of records) {
      const record = Buffer.from(raw);
      const header = decodeRecordHeader(record, 0);
      if (header.tenantNum !== tenantNum) throw BadRequest('a chunk record of another tenant');
      if (record.length !== RECORD_HEADER_SIZE + header.payloadLength)
        throw BadRequest('a chunk record with a bad length');
      verifyPayload(header, record.subarray(RECORD_HEADER_SIZE));
      const id = Buffer.from(header.chunkId);
      const own = replace ? undefined : held?.get(id.toString('hex'));
      if (own !== undefined && this.segmentLive(own.segmentId)) {
        locations.set(id.toString('hex'), own);
        this.recordsKept += 1;
        continue;
      }
      if (!replace && this.chunkHeld(tenantNum, id)) {
        this.recordsKept += 1;
        continue;
      }
      const at = await this.writer.append([record]);
      appended.push(at.durable());
      locations.set(Buffer.from(header.chunkId).toString('hex'), {
        segmentId: at.segmentId,
        offset: at.offset,
        length: at.length,
        payloadChecksum: header.payloadChecksum,
      });
    }
    await Promise.all(appended);
    // Records whose manifest never came (its sender died) are only forgotten, never committed:
    // their bytes are garbage that compaction reclaims.
    this.hold(tenantNum, locations);
    return locations;
  }

  private hold(tenantNum: number, locations: Map<string, ManifestChunk['location']>): void {
    const held = this.pending.get(tenantNum) ?? new Map<string, ManifestChunk['location']>();
    if (held.size > PENDING_RECORDS_MAX) held.clear();
    for (const [id, location] of locations) held.set(id, location);
    this.pending.set(tenantNum, held);
  }

  /**
   * The body of a write this node forwards to its partition's leader, stored here by the upload
   * pipeline: when the leader's copy comes back (this node is a replica), the commit references
   * these records instead of a second copy (`storeRecords`).
   */
  holdOwn(tenantNum: number, chunks: readonly ManifestChunk[]): void {
    const own = new Map<string, ManifestChunk['location']>();
    for (const chunk of chunks)
      if (chunk.location !== undefined) own.set(chunk.id.toString('hex'), chunk.location);
    if (own.size > 0) this.hold(tenantNum, own);
  }

  /** Whether the index holds chunk `id` referenced, in a segment that is not being deleted. */
  private chunkHeld(tenantNum: number, id: Buffer): boolean {
    const chunk = this.local.store.get<ChunkRecord>(DB.chunks, chunkKey(tenantNum, id));
    return chunk !== undefined && chunk.refs > 0 && this.segmentLive(chunk.segmentId);
  }

  private segmentLive(segmentId: number): boolean {
    const segment = this.local.store.get<SegmentRecord>(DB.segments, segmentKey(segmentId));
    return segment !== undefined && segment.state !== 'deleted';
  }

  /** Received records not appended, since this node held their chunk already (`storeRecords`). */
  private recordsKept = 0;

  /** Locations of records received ahead of their manifest, by tenant number and chunk id. */
  private readonly pending = new Map<number, Map<string, ManifestChunk['location']>>();

  private async acceptPut(body: Record<string, unknown>): Promise<Record<string, unknown>> {
    const args = body['args'] as Record<string, unknown> | undefined;
    const seq = body['seq'];
    const now = body['now'];
    if (args === undefined || typeof seq !== 'number' || typeof now !== 'number')
      throw BadRequest('put takes {args, seq, now}');
    const { tenant, bucket } = this.bucketOf(args);
    const chunks = this.located(tenant.num, args['chunks']);
    // Forgotten also on a failure: a resend (a hint) then stores the records again.
    await this.applyPut({ ...args, chunks }, seq, now).finally(() =>
      this.forget(tenant.num, chunks),
    );
    // The version's metadata as of its last change (repair's copy), once this node holds it.
    const mseq = body['mseq'];
    const key = String(args['key']);
    if (typeof mseq === 'number' && this.localHead(bucket, key).seq === seq)
      await this.stampMetadata(bucket.id, key, seq, mseq);
    return { seq };
  }

  /** A manifest's chunks with where this node stored the records sent ahead of it. */
  located(tenantNum: number, refs: unknown): ManifestChunk[] {
    if (!Array.isArray(refs)) throw BadRequest('a manifest has chunks');
    const held = this.pending.get(tenantNum);
    return (refs as Array<{ id: Buffer; plainLength: number }>).map((chunk) => {
      const id = Buffer.from(chunk.id);
      const location = held?.get(id.toString('hex'));
      return { id, plainLength: chunk.plainLength, ...(location ? { location } : {}) };
    });
  }

  /** Forgets the held locations of chunks a committed manifest now references. */
  forget(tenantNum: number, chunks: ReadonlyArray<{ id: Buffer }>): void {
    const held = this.pending.get(tenantNum);
    for (const chunk of chunks) held?.delete(chunk.id.toString('hex'));
  }

  private async acceptDelete(body: Record<string, unknown>): Promise<Record<string, unknown>> {
    const args = body['args'] as Record<string, unknown> | undefined;
    const seq = body['seq'];
    const now = body['now'];
    if (args === undefined || typeof seq !== 'number' || typeof now !== 'number')
      throw BadRequest('delete takes {args, seq, now}');
    await this.applyDelete(args, seq, now);
    return { seq };
  }

  /** Commits a replicated version, unless this node holds a newer write of its key. */
  private async applyPut(args: Record<string, unknown>, seq: number, now: number): Promise<void> {
    this.observe(seq);
    const { bucket } = this.bucketOf(args);
    const key = String(args['key']);
    if (this.localHead(bucket, key).seq >= seq) return;
    // A version deleted by its id here is not brought back by a replica that missed the delete.
    if (this.deletedSince(bucket, key, versionIdOf(seq)) > seq) return;
    await this.local.runLocal('putObject', args, { reserved: { nextSeq: seq }, now });
    this.clearTomb(bucket.id, key, seq);
  }

  async applyDelete(args: Record<string, unknown>, seq: number, now: number): Promise<void> {
    this.observe(seq);
    const { bucket } = this.bucketOf(args);
    const key = String(args['key']);
    if (this.localHead(bucket, key).seq >= seq) return;
    try {
      await this.local.runLocal('deleteObject', args, { reserved: { nextSeq: seq }, now });
    } catch (error) {
      if (!(error instanceof Error && 'code' in error && error.code === 'not_found')) throw error;
    }
    if (bucket.versioning === 'Unversioned' && args['versionId'] === undefined)
      await this.writeTomb(bucket.id, key, seq);
    if (typeof args['versionId'] === 'string')
      await this.writeVtomb(bucket.id, key, args['versionId'], seq);
  }

  /**
   * Records that upload `uploadId` of `key` ended here (see UTOMB_PREFIX); the key lets tombstone
   * GC ask a replica whether it still holds the upload open.
   */
  async endUpload(bucketId: number, uploadId: string, key: string): Promise<void> {
    const at = Buffer.from(`${UTOMB_PREFIX}${bucketId}/${uploadId}`);
    await this.local.commit([{ db: DB.meta, key: at, value: { at: Date.now(), key } }]);
  }

  // ---- GC of version and upload tombstones and of stamps (repair.ts) -------------------------

  endTombstones(
    bucket: BucketRecord,
    kind: EndTombstone['kind'],
    after: string | undefined,
    limit: number,
  ): EndTombstone[] {
    const prefix = endTombPrefix(bucket.id, kind);
    const start =
      after === undefined ? prefix : Buffer.concat([prefix, Buffer.from(after, 'hex'), ZERO]);
    const found: EndTombstone[] = [];
    for (const { key, value } of this.local.store.range<{
      seq?: number;
      at?: number;
      key?: string;
    }>(DB.meta, { start, end: Buffer.concat([prefix, Buffer.from([0xff])]), limit })) {
      const rest = key.subarray(prefix.length);
      if (kind === 'upload') {
        found.push({
          kind,
          at: rest.toString('hex'),
          time: value.at ?? 0,
          id: rest.toString('utf8'),
          ...(typeof value.key === 'string' ? { key: value.key } : {}),
        });
        continue;
      }
      const slash = rest.indexOf(0x2f);
      found.push({
        kind,
        at: rest.toString('hex'),
        time: this.timeOfSeq(value.seq ?? 0),
        id: rest.subarray(0, slash).toString('utf8'),
        key: rest.subarray(slash + 1).toString('utf8'),
      });
    }
    return found;
  }

  async holdsLive(
    address: string,
    args: {
      tenantId: string;
      bucket: string;
      kind: EndTombstone['kind'];
      items: ReadonlyArray<EndTombstone>;
    },
  ): Promise<boolean[]> {
    const items = args.items.map((item) => ({ id: item.id, key: item.key }));
    return (await this.call(address, 'holds-live', { ...args, items }))['live'] as boolean[];
  }

  /** Whether this node holds a live copy of what each tombstone ended (see `holdsLive`). */
  private liveHere(body: Record<string, unknown>): Record<string, unknown> {
    const { bucket } = this.bucketOf(body);
    const items = body['items'];
    if (!Array.isArray(items) || items.length > REPAIR_PAGE_KEYS)
      throw BadRequest(`holds-live takes at most ${REPAIR_PAGE_KEYS} items`);
    const { store } = this.local;
    store.refresh();
    const live = (items as Array<{ id?: unknown; key?: unknown }>).map(({ id, key }) => {
      if (typeof id !== 'string') throw BadRequest('holds-live items need an id');
      if (body['kind'] === 'version') {
        if (typeof key !== 'string') throw BadRequest('a version item needs its key');
        return findVersionIn(store, bucket.id, key, id) !== undefined;
      }
      // The record first: an upload brought back after its end (a late create) is live here,
      // and its tombstone must stay until that record is gone.
      const known = typeof key === 'string' && /^[0-9a-f]+$/.test(id);
      if (known && store.has(DB.multipart, multipartUploadKey(bucket.id, key, id))) return true;
      if (this.uploadEnded(bucket, id)) return false;
      // Without the key the upload cannot be looked up: counted live, so the tombstone stays.
      return !known;
    });
    return { live };
  }

  async dropEndTombstones(bucket: BucketRecord, tombs: ReadonlyArray<EndTombstone>): Promise<void> {
    await this.local.commit(
      tombs.map((tomb) => ({
        db: DB.meta,
        key: Buffer.concat([endTombPrefix(bucket.id, tomb.kind), Buffer.from(tomb.at, 'hex')]),
      })),
    );
  }

  async dropOrphanStamps(bucket: BucketRecord, before: number): Promise<number> {
    const prefix = Buffer.from(`${STAMP_PREFIX}${bucket.id}/`);
    const end = Buffer.concat([prefix, Buffer.from([0xff])]);
    let start = prefix;
    let dropped = 0;
    for (;;) {
      const orphans: Buffer[] = [];
      let last: Buffer | undefined;
      for (const { key, value } of this.local.store.range<{ mseq: number }>(DB.meta, {
        start,
        end,
        limit: REPAIR_PAGE_KEYS,
      })) {
        last = key;
        const rest = key.subarray(prefix.length);
        const slash = rest.indexOf(0x2f);
        const seq = Number(rest.subarray(0, slash).toString('latin1'));
        const name = rest.subarray(slash + 1).toString('utf8');
        if (this.timeOfSeq(value.mseq) >= before || !Number.isSafeInteger(seq)) continue;
        if (!this.local.store.has(DB.versions, versionKey(bucket.id, name, seq))) orphans.push(key);
      }
      if (last === undefined) return dropped;
      start = Buffer.concat([last, ZERO]);
      if (orphans.length === 0) continue;
      // A version that arrived meanwhile keeps its stamp: checked again inside the commit.
      await this.local.commit(() => {
        const gone = orphans.filter((key) => {
          const rest = key.subarray(prefix.length);
          const slash = rest.indexOf(0x2f);
          const seq = Number(rest.subarray(0, slash).toString('latin1'));
          const name = rest.subarray(slash + 1).toString('utf8');
          return !this.local.store.has(DB.versions, versionKey(bucket.id, name, seq));
        });
        dropped += gone.length;
        return gone.map((key) => ({ db: DB.meta, key }));
      });
    }
  }

  uploadEnded(bucket: BucketRecord, uploadId: string): boolean {
    return this.local.store.has(DB.meta, Buffer.from(`${UTOMB_PREFIX}${bucket.id}/${uploadId}`));
  }

  /**
   * The sequence of the newest delete this node holds of version `versionId` of `key`: by its
   * id, or (the null version) an unversioned delete of the key; 0 for none.
   */
  deletedSince(bucket: BucketRecord, key: string, versionId: string): number {
    const { store } = this.local;
    const byId = store.get<{ seq: number }>(DB.meta, vtombKey(bucket.id, versionId, key))?.seq;
    const whole =
      versionId === 'null'
        ? store.get<{ seq: number }>(DB.meta, tombKey(bucket.id, key))?.seq
        : undefined;
    return Math.max(byId ?? 0, whole ?? 0);
  }

  private headOf(body: Record<string, unknown>): Head {
    const { bucket } = this.bucketOf(body);
    const key = String(body['key']);
    const head = this.localHead(bucket, key);
    return { ...head, mseq: this.stampOf(bucket.id, key, head.seq) };
  }

  /** The current version's metadata of a key, as `sendMetadata` sends it (a read's catch-up). */
  private metadataOf(body: Record<string, unknown>): Record<string, unknown> {
    const { bucket } = this.bucketOf(body);
    const key = String(body['key']);
    const version = this.local.store.get<ObjectVersionRecord>(
      DB.objects,
      objectKey(bucket.id, key),
    );
    if (version === undefined || version.deleteMarker === true)
      throw NotFound(`object ${key} not found on this replica`);
    return metadataMessage(bucket, version, this.stampOf(bucket.id, key, version.seq));
  }

  /** The newest write of `key` this node holds: its version's sequence, or its tombstone's. */
  localHead(bucket: BucketRecord, key: string): Head {
    const { store } = this.local;
    store.refresh();
    const current = store.get<ObjectVersionRecord>(DB.objects, objectKey(bucket.id, key));
    const tomb = store.get<{ seq: number }>(DB.meta, tombKey(bucket.id, key));
    const seq = current?.seq ?? 0;
    if (tomb !== undefined && tomb.seq > seq) return { seq: tomb.seq, deleted: true };
    return { seq, deleted: current?.deleteMarker === true && seq > 0 };
  }

  private manifestOf(body: Record<string, unknown>): Record<string, unknown> {
    const { bucket } = this.bucketOf(body);
    const key = String(body['key']);
    const version = this.local.store.get<ObjectVersionRecord>(
      DB.objects,
      objectKey(bucket.id, key),
    );
    if (version === undefined || version.deleteMarker === true)
      throw NotFound(`object ${key} not found on this replica`);
    return {
      seq: version.seq,
      now: version.lastModified,
      chunks: unpackChunkRefs(version.chunks),
      args: putArgsOf(String(body['tenantId']), bucket.name, version),
    };
  }

  /** Chunk records by id, as many as fit one batch (at least one). */
  private async recordsOf(body: Record<string, unknown>): Promise<Record<string, unknown>> {
    const tenantNum = body['tenantNum'];
    const ids = body['ids'];
    if (typeof tenantNum !== 'number' || !Array.isArray(ids))
      throw BadRequest('chunks takes {tenantNum, ids}');
    const records: Buffer[] = [];
    let bytes = 0;
    for (const id of ids as Buffer[]) {
      const record = await this.readRecord(tenantNum, Buffer.from(id));
      if (records.length > 0 && bytes + record.length > DATA_BATCH_BYTES) break;
      records.push(record);
      bytes += record.length;
    }
    return { records };
  }

  // ---- helpers ------------------------------------------------------------------------------

  private async readRecord(
    tenantNum: number,
    id: Buffer,
    location?: ManifestChunk['location'],
  ): Promise<Buffer> {
    const chunk = location ?? this.local.store.get<ChunkRecord>(DB.chunks, chunkKey(tenantNum, id));
    if (chunk === undefined) throw NotFound('a chunk of the object is not on this node');
    const file = await open(join(this.local.segmentsDir, segmentFileName(chunk.segmentId)), 'r');
    try {
      const record = Buffer.alloc(chunk.length);
      const { bytesRead } = await file.read(record, 0, chunk.length, chunk.offset);
      if (bytesRead !== chunk.length) throw Unavailable('a chunk record was cut short');
      const header = decodeRecordHeader(record, 0);
      verifyPayload(header, record.subarray(RECORD_HEADER_SIZE));
      return record;
    } finally {
      await file.close();
    }
  }

  bucketOf(args: Record<string, unknown>): { tenant: TenantRecord; bucket: BucketRecord } {
    const tenantId = String(args['tenantId']);
    const name = String(args['bucket']);
    const { store } = this.local;
    const tenant = store.get<TenantRecord>(DB.tenants, tenantKey(tenantId));
    const bucket = store.get<BucketRecord>(DB.buckets, tenantChildKey(tenantId, name));
    if (tenant === undefined || bucket === undefined)
      throw NotFound(`bucket ${name} is not known on this node yet`);
    return { tenant, bucket };
  }

  /**
   * The bucket's replica set. A draining member is no candidate (its data moves off, and a
   * repair pushes what it holds to the set without it); it still coordinates requests.
   */
  replicaIds(bucket: BucketRecord): string[] {
    return this.view.replicasOfBucket(bucket.id);
  }

  call(
    address: string,
    name: string,
    body: Record<string, unknown>,
    timeoutMs?: number,
  ): Promise<Record<string, unknown>> {
    return callData({
      address,
      name,
      body: { ...body, layout: this.view.layoutVersion(), ...this.sending.getStore() },
      secret: this.secret,
      from: this.view.nodeId,
      ...(timeoutMs === undefined ? {} : { timeoutMs }),
    });
  }

  private async writeVtomb(
    bucketId: number,
    key: string,
    versionId: string,
    seq: number,
  ): Promise<void> {
    await this.local.commit([
      { db: DB.meta, key: vtombKey(bucketId, versionId, key), value: { seq } },
    ]);
  }

  private async writeTomb(bucketId: number, key: string, seq: number): Promise<void> {
    await this.local.commit([{ db: DB.meta, key: tombKey(bucketId, key), value: { seq } }]);
  }

  private clearTomb(bucketId: number, key: string, seq: number): void {
    const tomb = this.local.store.get<{ seq: number }>(DB.meta, tombKey(bucketId, key));
    if (tomb !== undefined && tomb.seq < seq)
      void this.local.commit([{ db: DB.meta, key: tombKey(bucketId, key) }]);
  }
}

/** A version's tags, retention and legal hold as of change `mseq` (see `sendMetadata`). */
function metadataMessage(
  bucket: BucketRecord,
  version: ObjectVersionRecord,
  mseq: number,
): Record<string, unknown> {
  return {
    args: { tenantId: bucket.tenantId, bucket: bucket.name, key: version.key },
    versionId: version.versionId,
    seq: version.seq,
    mseq,
    tags: version.tags ?? [],
    ...(version.retention === undefined ? {} : { retention: version.retention }),
    legalHold: version.legalHold ?? 'OFF',
  };
}

/**
 * The arguments of a `putObject` that writes `version` again (its chunks apart): what it holds
 * of tags, retention, legal hold, encryption and part sizes too.
 */
export function putArgsOf(
  tenantId: string,
  bucket: string,
  version: ObjectVersionRecord,
): Record<string, unknown> {
  return {
    tenantId,
    bucket,
    key: version.key,
    size: version.size,
    etag: version.etag,
    contentType: version.contentType,
    metadata: version.metadata,
    checksums: version.checksums,
    compressed: version.compressed,
    ...(version.headers === undefined ? {} : { headers: version.headers }),
    ...(version.tags === undefined ? {} : { tags: version.tags }),
    ...(version.sse === undefined ? {} : { sse: version.sse }),
    // Without it a copy of an SSE-C version would read as plain bytes, and never with the key.
    ...(version.sseCustomer === undefined ? {} : { sseCustomer: version.sseCustomer }),
    ...(version.partSizes === undefined ? {} : { partSizes: version.partSizes }),
    ...(version.retention === undefined && version.legalHold === undefined
      ? {}
      : {
          lock: {
            ...(version.retention === undefined
              ? {}
              : { mode: version.retention.mode, retainUntil: version.retention.retainUntil }),
            ...(version.legalHold === undefined ? {} : { legalHold: version.legalHold }),
          },
        }),
  };
}

/** A put's arguments as a replica runs them: no caller, conditions, idempotency or audit. */
function replicaPutArgs(args: Record<string, unknown>): Record<string, unknown> {
  const {
    caller: _caller,
    ifMatch: _ifMatch,
    ifNoneMatch: _ifNoneMatch,
    ifUnmodifiedSince: _ifUnmodifiedSince,
    idempotency: _idempotency,
    audit: _audit,
    chunks,
    ...rest
  } = args;
  return {
    ...rest,
    chunks: (chunks as ManifestChunk[]).map((chunk) => ({
      id: chunk.id,
      plainLength: chunk.plainLength,
    })),
  };
}
