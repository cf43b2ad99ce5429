// Lightwell's records in etcd (docs/cluster.md §3, key layout), under `lw/<clusterId>/`:
//
//   cluster              {v, id, createdAt, partitions, replicationFactor}    once, at bootstrap
//   members/<nodeId>     MemberRecord                                         compare-and-swap
//   live/<nodeId>        {since, softwareVersion}                             under a lease
//   locks/membership     etcd3's lock: one membership change at a time
//   layout/current, layout/v/<16 digits>   the versioned layout (layout.ts), with the member
//                        change that alters the storage set, in the same transaction
//
// Every change of a record is a transaction that compares the record's mod revision (or its
// absence), so two admins racing on one member cannot both win. etcd member ids are uint64 and
// stay strings (the client gives strings; never Number, which loses bits above 2^53).

import type { ComparatorBuilder, Etcd3, IMember, Lease, PutBuilder } from 'etcd3';
import assert from 'node:assert';
import { Conflict, Unavailable } from '../util/errors.js';
import { LAYOUT_CURRENT, layoutHistoryKey, nextLayout, type Layout } from './layout.js';

export { PARTITIONS } from './layout.js';
export const RECORD_VERSION = 1;
/** A node's liveness lease: it is down this long after its last keepalive. */
export const LIVENESS_TTL_S = 10;
/** How soon a liveness key that could not be written is tried again. */
const LIVENESS_RETRY_MS = 1_000;

export type MemberState =
  'joining' | 'learner' | 'voter' | 'draining' | 'drained' | 'lost' | 'removed';

export interface MemberRecord {
  readonly v: number;
  readonly id: string;
  readonly state: MemberState;
  /** The node's `cluster.listen`. */
  readonly address: string;
  readonly name: string;
  readonly zone: string;
  readonly site: string;
  readonly softwareVersion: string;
  /** Its etcd member (absent with external etcd, or before etcd added it). */
  readonly etcdMemberId?: string;
  readonly etcdPeerUrl?: string;
  readonly etcdClientUrl?: string;
  /** Its share of the partitions' replicas against the others' (layout.ts); absent: 1. */
  readonly capacityBytes?: number;
  readonly joinedAt: string;
  readonly stateSince: string;
  readonly reason: string;
}

export interface ClusterRecord {
  readonly v: number;
  readonly id: string;
  readonly createdAt: string;
  readonly partitions: number;
  readonly replicationFactor: number;
}

export interface Versioned<T> {
  readonly record: T;
  readonly modRevision: string;
}

export class Registry {
  private constructor(
    readonly client: Etcd3,
    readonly clusterId: string,
  ) {}

  /** Loads the etcd client only now: a single node never loads it (nor gRPC). */
  static async connect(endpoints: readonly string[], clusterId: string): Promise<Registry> {
    assert(endpoints.length > 0, 'etcd endpoints');
    const { Etcd3 } = await import('etcd3');
    const client = new Etcd3({
      hosts: [...endpoints],
      dialTimeout: 3_000,
      defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + 10_000 }),
    });
    return new Registry(client, clusterId);
  }

  key(name: string): string {
    return `lw/${this.clusterId}/${name}`;
  }

  async cluster(): Promise<ClusterRecord | undefined> {
    const text = await this.client.get(this.key('cluster')).string();
    return text === null ? undefined : (JSON.parse(text) as ClusterRecord);
  }

  /** Writes the cluster record unless one exists; answers whether this call wrote it. */
  async createCluster(record: ClusterRecord): Promise<boolean> {
    const key = this.key('cluster');
    const result = await this.client
      .if(key, 'Version', '==', 0)
      .then(this.client.put(key).value(JSON.stringify(record)))
      .commit();
    return result.succeeded;
  }

  async members(): Promise<Array<Versioned<MemberRecord>>> {
    const response = await this.client.getAll().prefix(this.key('members/')).exec();
    return response.kvs.map((kv) => ({
      record: JSON.parse(kv.value.toString()) as MemberRecord,
      modRevision: kv.mod_revision,
    }));
  }

  async member(id: string): Promise<Versioned<MemberRecord> | undefined> {
    const response = await this.client.get(this.key(`members/${id}`)).exec();
    const kv = response.kvs[0];
    if (kv === undefined) return undefined;
    return {
      record: JSON.parse(kv.value.toString()) as MemberRecord,
      modRevision: kv.mod_revision,
    };
  }

  /** Creates a member record; false when the id is (or ever was) in use. */
  async createMember(record: MemberRecord): Promise<boolean> {
    const key = this.key(`members/${record.id}`);
    const change = await this.layoutChange(record);
    const result = await change
      .guard(this.client.if(key, 'Version', '==', 0))
      .then(this.client.put(key).value(JSON.stringify(record)), ...change.puts)
      .commit();
    return result.succeeded;
  }

  /**
   * Replaces a member record if it has not changed since `modRevision`; a lost race is a 409,
   * since another change of the same member committed first. A change of the storage set
   * publishes the next layout in the same transaction (layout.ts).
   */
  async updateMember(current: Versioned<MemberRecord>, record: MemberRecord): Promise<void> {
    assert.equal(current.record.id, record.id);
    const key = this.key(`members/${record.id}`);
    const change = await this.layoutChange(record);
    const result = await change
      .guard(this.client.if(key, 'Mod', '==', current.modRevision))
      .then(this.client.put(key).value(JSON.stringify(record)), ...change.puts)
      .commit();
    if (!result.succeeded)
      throw Conflict(`member ${record.id} changed meanwhile; read the membership and retry`);
  }

  /** The cluster's replication factor (its record is written once, at bootstrap). */
  async replicationFactor(): Promise<number> {
    this.factor ??= (await this.cluster())?.replicationFactor;
    if (this.factor === undefined) throw Unavailable('the cluster record is not in etcd');
    return this.factor;
  }

  private factor: number | undefined;

  /** The current layout and its mod revision; undefined before the first one is stored. */
  async layout(): Promise<Versioned<Layout> | undefined> {
    const response = await this.client.get(this.key(LAYOUT_CURRENT)).exec();
    const kv = response.kvs[0];
    if (kv === undefined) return undefined;
    return { record: JSON.parse(kv.value.toString()) as Layout, modRevision: kv.mod_revision };
  }

  /**
   * Stores the layout of the membership as it is, unless the current one already says the same
   * (a cluster made before layouts were stored gets its first here). Answers the current version.
   */
  async ensureLayout(reason: string): Promise<number> {
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const current = await this.layout();
      const members = (await this.members()).map((entry) => entry.record);
      const next = nextLayout(current?.record, members, reason, await this.replicationFactor());
      if (next === undefined) return current?.record.version ?? 0;
      const guarded = this.guardLayout(
        current,
        this.client.if(this.key('cluster'), 'Version', '>', 0),
      );
      if ((await guarded.then(...this.layoutPuts(next)).commit()).succeeded) return next.version;
    }
    throw Conflict('the layout changed meanwhile; retry');
  }

  /**
   * What a member change does to the layout: the membership is read with `record` in place and
   * the next layout computed (membership changes are serialised by the membership lock, so this
   * read is the membership the transaction changes); `guard` adds the comparison that the layout
   * is still the one read, `puts` the new layout's keys when the storage set changes.
   */
  private async layoutChange(record: MemberRecord): Promise<{
    guard: (txn: ComparatorBuilder) => ComparatorBuilder;
    puts: PutBuilder[];
  }> {
    const current = await this.layout();
    const members = new Map((await this.members()).map((entry) => [entry.record.id, entry.record]));
    members.set(record.id, record);
    const next = nextLayout(
      current?.record,
      members.values(),
      `${record.id} ${record.state}`,
      await this.replicationFactor(),
    );
    return {
      guard: (txn) => this.guardLayout(current, txn),
      puts: next === undefined ? [] : this.layoutPuts(next),
    };
  }

  private guardLayout(current: Versioned<Layout> | undefined, txn: ComparatorBuilder) {
    const key = this.key(LAYOUT_CURRENT);
    return current === undefined
      ? txn.and(key, 'Version', '==', 0)
      : txn.and(key, 'Mod', '==', current.modRevision);
  }

  private layoutPuts(layout: Layout): PutBuilder[] {
    const value = JSON.stringify(layout);
    return [
      this.client.put(this.key(LAYOUT_CURRENT)).value(value),
      this.client.put(this.key(layoutHistoryKey(layout.version))).value(value),
    ];
  }

  /** The ids of the nodes whose liveness lease is alive. */
  async liveIds(): Promise<Set<string>> {
    const prefix = this.key('live/');
    const keys = await this.client.getAll().prefix(prefix).keys();
    return new Set(keys.map((key) => key.slice(prefix.length)));
  }

  /** Keeps `live/<nodeId>` alive while the returned lease lives; re-grants it when lost. */
  keepAlive(nodeId: string, info: Record<string, unknown>, onError: (e: unknown) => void): Lease {
    const lease = this.client.lease(LIVENESS_TTL_S, { autoKeepAlive: true });
    const value = JSON.stringify({ since: new Date().toISOString(), ...info });
    // A put that fails (it went to a member that just died, say) is tried again while the lease
    // lives: a granted lease whose key was never written would keep the node "down" for good.
    let lost = false;
    lease.on('lost', () => (lost = true));
    const put = (): void => {
      lease
        .put(this.key(`live/${nodeId}`))
        .value(value)
        .exec()
        .catch((error: unknown) => {
          onError(error);
          if (!lost && !lease.revoked()) setTimeout(put, LIVENESS_RETRY_MS).unref();
        });
    };
    put();
    return lease;
  }

  /** Runs `action` holding the cluster's membership lock (one change at a time). */
  async withMembershipLock<T>(action: () => Promise<T>): Promise<T> {
    const lock = this.client.lock(this.key('locks/membership')).ttl(30);
    try {
      await lock.acquire();
    } catch (cause) {
      throw Conflict(
        'another membership change is in progress; retry when it is done',
        {
          blockers: [{ code: 'change_in_progress', message: 'another membership change runs' }],
        },
        { cause },
      );
    }
    try {
      return await action();
    } finally {
      await lock.release().catch(() => undefined);
    }
  }

  async etcdMembers(): Promise<IMember[]> {
    const response = await this.client.cluster.memberList({ linearizable: true });
    return response.members;
  }

  /** The etcd member id of raft's leader, as any member reports it. */
  async etcdLeaderId(): Promise<string | undefined> {
    try {
      const status = await this.client.maintenance.status({});
      return status.leader === '0' ? undefined : status.leader;
    } catch (cause) {
      throw Unavailable('etcd did not answer its status', {}, { cause });
    }
  }

  close(): void {
    this.client.close();
  }
}
