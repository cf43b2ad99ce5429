// What a member's engine knows of the cluster to place objects (replication.ts): its own node
// number, the replication factor, and the storage members with their addresses, re-read from
// etcd every VIEW_REFRESH_MS (membership changes are rare, and placement tolerates a view a few
// seconds old: a write still needs a majority of the set it was sent to). A node that has not
// read it for QUORUM_STALE_MS cannot reach etcd's quorum and refuses writes (`quorate`).
//
// Placement reads the stored layout (layout.ts) and its version, which every replicated write
// carries (fencing, replication.ts). The layout is polled every `cluster.layout_poll` (default as
// often as the membership) and read again at once whenever a peer's message or refusal names a
// newer version, or a repair starts: a node never needs the poll to learn a change that concerns
// it, only to notice one no peer has told it of yet.
//
// A bucket's replicas are its partition's in the layout's table (layout.ts). Every poll also
// reads the liveness leases and the partitions' leader records (leaders.ts), takes the
// partitions this node should lead, and keeps the highest epoch of each partition it has seen
// (from etcd, or from a write that carried it), which replicated writes are fenced by.

import { Unavailable } from '../util/errors.js';
import type { Logger } from '../util/log.js';
import type { MemberRecord, Registry } from './registry.js';
import { assignPartitions, layoutMembersOf, partitionOf, PARTITIONS, tableOf } from './layout.js';
import type { Layout } from './layout.js';
import {
  partitionsToTake,
  readLeaders,
  takeLeaderships,
  type HeldLeader,
  type LeaderRecord,
} from './leaders.js';
import type { ClusterView } from './replication.js';

const VIEW_REFRESH_MS = 2_000;
/** How long an engine that starts waits for its first read of the membership. */
const FIRST_READ_MS_MAX = 3_000;
/**
 * A node whose last read of the membership (a linearizable etcd read: it needs etcd's quorum) is
 * older than this refuses writes: it is on the minority side of a partition, or etcd has lost
 * its quorum.
 */
const QUORUM_STALE_MS = 10_000;
const NODE_NUMS_MAX = 128;
/** Members that hold data: every state before `drained`, except a join in progress. */
const STORAGE_STATES = new Set(['voter', 'draining']);

export class EtcdClusterView implements ClusterView {
  private current = new Map<string, MemberRecord>();
  /** Every member's state, storage or not (fencing reads it). */
  private states = new Map<string, MemberRecord['state']>();
  private timer: NodeJS.Timeout | undefined;
  private agreedAt = 0;
  /** The layout placement reads; undefined before a cluster stores one (version 0). */
  private layout: Layout | undefined;
  private layoutReadAt = 0;
  /** Every member's record as last read (placement takes addresses from it). */
  private records = new Map<string, MemberRecord>();
  /** The partition table placement reads (the layout's, or the membership's without one). */
  private table: ReadonlyArray<readonly string[]> = [];
  /** The table placed by before the current layout: reads still look there (docs §9). */
  private previousTable: ReadonlyArray<readonly string[]> = [];
  /** Each partition's leader record as last read or taken. */
  private leaders = new Map<number, LeaderRecord>();
  /** The members whose liveness lease was alive at the last read. */
  private live = new Set<string>();
  /** The highest epoch of each partition this node has seen (etcd, or a write carrying it). */
  private readonly epochs = new Array<number>(PARTITIONS).fill(0);
  /** A read in progress, shared by everyone who asked for one before it started. */
  private reading: Promise<void> | undefined;
  /** The read after it, shared by everyone who asks while `reading` is under way. */
  private queued: Promise<void> | undefined;

  private constructor(
    readonly nodeId: string,
    readonly nodeNum: number,
    readonly replicationFactor: number,
    private readonly registry: Registry,
    private readonly log: Logger,
    private readonly layoutPollMs: number,
  ) {}

  /**
   * The view of this node; its number and the replication factor are kept in the index once
   * read (`saved`), so that an engine restarting while etcd has no quorum still starts (its
   * writes are refused until etcd answers again).
   */
  static async open(options: {
    registry: Registry;
    nodeId: string;
    saved: { nodeNum: number; replicationFactor: number } | undefined;
    save: (identity: { nodeNum: number; replicationFactor: number }) => Promise<void>;
    log: Logger;
    /** How often the layout is read when nothing else made this node read it. */
    layoutPollMs?: number;
  }): Promise<EtcdClusterView> {
    const { registry, nodeId, log } = options;
    let identity = options.saved;
    if (identity === undefined) {
      const cluster = await registry.cluster();
      if (cluster === undefined) throw Unavailable('the cluster record is not in etcd');
      identity = {
        nodeNum: await nodeNumOf(registry, nodeId),
        replicationFactor: cluster.replicationFactor,
      };
      await options.save(identity);
    }
    const view = new EtcdClusterView(
      nodeId,
      identity.nodeNum,
      identity.replicationFactor,
      registry,
      log,
      options.layoutPollMs ?? VIEW_REFRESH_MS,
    );
    // The first read, if etcd answers soon; without it, the engine starts all the same.
    let waited: NodeJS.Timeout | undefined;
    await Promise.race([
      view.refresh(),
      new Promise((resolve) => (waited = setTimeout(resolve, FIRST_READ_MS_MAX))),
    ]);
    clearTimeout(waited);
    view.timer = setInterval(() => void view.poll(), VIEW_REFRESH_MS);
    view.timer.unref();
    return view;
  }

  /**
   * The storage members placement reads: the layout's, with their addresses from the membership
   * (a layout member's state is `draining` or `voter` as the layout says); without a stored
   * layout, the storage members of the membership.
   */
  members(): ReadonlyMap<string, MemberRecord> {
    return this.current;
  }

  /** The version of the layout placement reads (0: none stored yet). */
  layoutVersion(): number {
    return this.layout?.version ?? 0;
  }

  addressOf(nodeId: string): string | undefined {
    return this.records.get(nodeId)?.address;
  }

  stateOf(nodeId: string): MemberRecord['state'] | undefined {
    return this.states.get(nodeId);
  }

  memberIds(): string[] {
    return [...this.states.keys()];
  }

  quorate(): boolean {
    return Date.now() - this.agreedAt < QUORUM_STALE_MS;
  }

  /** A bucket's replicas: its partition's in the table, the first the preferred leader. */
  replicasOfBucket(bucketId: number): string[] {
    return [...(this.table[partitionOf(bucketId)] ?? [])];
  }

  /**
   * The replicas a bucket had under the layout before the current one that it has no more: a
   * read that finds nothing in the current set asks them, as a rebalance may not have copied
   * their data yet (the layout stays until the next change replaces it).
   */
  previousReplicasOfBucket(bucketId: number): string[] {
    const now = this.table[partitionOf(bucketId)] ?? [];
    return (this.previousTable[partitionOf(bucketId)] ?? []).filter((id) => !now.includes(id));
  }

  /** The highest epoch of `partition` this node has seen (0: never led). */
  epochOf(partition: number): number {
    return this.epochs[partition] ?? 0;
  }

  /** A write carried `epoch` for `partition`: no lower one is taken from now on. */
  noteEpoch(partition: number, epoch: number): void {
    if (epoch > this.epochOf(partition)) this.epochs[partition] = epoch;
  }

  /**
   * The leader of `partition` as last read or taken, and whether its lease was alive then;
   * undefined when no member has led it yet.
   */
  leaderOf(partition: number): { nodeId: string; epoch: number; live: boolean } | undefined {
    const record = this.leaders.get(partition);
    if (record === undefined) return undefined;
    return { nodeId: record.nodeId, epoch: record.epoch, live: this.live.has(record.nodeId) };
  }

  /** The partition table and each partition's leader as last read (placement answers). */
  partitions(): { table: ReadonlyArray<readonly string[]>; leaders: Map<number, LeaderRecord> } {
    return { table: this.table, leaders: new Map(this.leaders) };
  }

  /**
   * Reads the membership, the layout and the leaders, in a read that starts after this call:
   * callers meanwhile share one read, but a read already under way when a caller asks may have
   * been answered before what the caller learned (a replica's refusal naming a newer layout), so
   * the caller waits for the next one. Sharing the read under way made a write refused as stale
   * find no newer layout and answer 503 while the newer one was already in etcd.
   */
  async refresh(): Promise<void> {
    if (this.reading === undefined) {
      this.reading = this.read(true).finally(() => (this.reading = undefined));
      return this.reading;
    }
    this.queued ??= this.reading.then(() => {
      this.queued = undefined;
      return this.refresh();
    });
    return this.queued;
  }

  async publishLayout(reason: string): Promise<void> {
    await this.registry.ensureLayout(reason);
    await this.refresh();
  }

  /** The periodic read: the membership, and the layout once `layoutPollMs` has passed. */
  private async poll(): Promise<void> {
    await this.read(Date.now() - this.layoutReadAt >= this.layoutPollMs);
  }

  private async read(withLayout: boolean): Promise<void> {
    try {
      const members = await this.registry.members();
      const layout = withLayout ? await this.registry.layout() : undefined;
      const [live, leaders] = await Promise.all([
        this.registry.liveIds(),
        readLeaders(this.registry.client, (name) => this.registry.key(name)),
      ]);
      this.agreedAt = Date.now();
      this.live = live;
      this.states = new Map(members.map((entry) => [entry.record.id, entry.record.state]));
      this.records = new Map(members.map((entry) => [entry.record.id, entry.record]));
      if (withLayout) {
        const record = await this.tabled(layout?.record);
        this.layoutReadAt = Date.now();
        // Versions only grow: a read answered by a lagging etcd member never goes back.
        if (record !== undefined && record.version > this.layoutVersion()) {
          if (this.layout !== undefined) this.previousTable = this.table;
          this.layout = record;
        }
      }
      this.current = this.placed();
      this.table =
        this.layout === undefined
          ? assignPartitions(
              undefined,
              layoutMembersOf(members.map((entry) => entry.record)),
              this.replicationFactor,
            )
          : tableOf(this.layout, this.replicationFactor);
      await this.lead(live, leaders);
    } catch (error) {
      this.log.warn({ err: error }, 'membership not re-read; placement uses the last one');
    }
  }

  /**
   * The layout placement may read: one stored before tables were (record version 1, whose nodes
   * placed buckets by rendezvous hashing) is never placed by a table under its own version, since
   * nodes would then disagree on placement without a version telling them apart. Its table is
   * published as the next version first (`ensureLayout`), and that one is read; until it is,
   * this node keeps what it had (version 0 at worst, whose writes every replica that read the
   * version 1 record refuses as stale).
   */
  private async tabled(record: Layout | undefined): Promise<Layout | undefined> {
    if (record === undefined || record.partitions !== undefined) return record;
    await this.registry.ensureLayout(`partition table for layout ${record.version}`);
    const next = (await this.registry.layout())?.record;
    return next?.partitions === undefined ? undefined : next;
  }

  /** Takes the partitions this node should lead (leaders.ts) and records every epoch read. */
  private async lead(live: Set<string>, held: Map<number, HeldLeader>): Promise<void> {
    const take = partitionsToTake(this.nodeId, this.layoutVersion(), this.table, live, held);
    const taken =
      take.length === 0
        ? new Map<number, LeaderRecord>()
        : await takeLeaderships(
            this.registry.client,
            (name) => this.registry.key(name),
            { nodeId: this.nodeId, layout: this.layoutVersion() },
            take,
            held,
          );
    if (taken.size > 0)
      this.log.info({ partitions: taken.size }, 'this node took the leadership of partitions');
    const leaders = new Map<number, LeaderRecord>(held);
    for (const [partition, record] of taken) leaders.set(partition, record);
    for (const [partition, record] of leaders) this.noteEpoch(partition, record.epoch);
    this.leaders = leaders;
  }

  private placed(): Map<string, MemberRecord> {
    if (this.layout === undefined)
      return new Map(
        [...this.records.values()]
          .filter((record) => STORAGE_STATES.has(record.state))
          .map((record) => [record.id, record]),
      );
    const placed = new Map<string, MemberRecord>();
    for (const member of this.layout.members) {
      const record = this.records.get(member.id);
      if (record !== undefined)
        placed.set(member.id, { ...record, state: member.draining ? 'draining' : 'voter' });
    }
    return placed;
  }

  close(): void {
    clearInterval(this.timer);
  }
}

/** This node's number (0 to 127), taken once from etcd's counter `ids/nodeNum`. */
async function nodeNumOf(registry: Registry, nodeId: string): Promise<number> {
  const own = registry.key(`node-nums/${nodeId}`);
  const counter = registry.key('ids/nodeNum');
  for (;;) {
    const held = await registry.client.get(own).string();
    if (held !== null) return Number(held);
    const response = await registry.client.get(counter).exec();
    const kv = response.kvs[0];
    const next = kv === undefined ? 0 : Number(kv.value.toString());
    if (next >= NODE_NUMS_MAX)
      throw Unavailable(`a cluster has at most ${NODE_NUMS_MAX} storage nodes in its life`);
    await registry.client
      .if(counter, 'Mod', '==', kv?.mod_revision ?? '0')
      .and(own, 'Create', '==', 0)
      .then(
        registry.client.put(own).value(String(next)),
        registry.client.put(counter).value(String(next + 1)),
      )
      .commit();
  }
}
