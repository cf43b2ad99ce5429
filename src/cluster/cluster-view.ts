// What a member's engine knows of the cluster to place objects (replication.ts): its own node
// number, the replication factor, and the storage members with their addresses, re-read from
// etcd every VIEW_REFRESH_MS (membership changes are rare, and placement tolerates a view a few
// seconds old: a write still needs a majority of the set it was sent to). A node that has not
// read it for QUORUM_STALE_MS cannot reach etcd's quorum and refuses writes (`quorate`).

import { Unavailable } from '../util/errors.js';
import type { Logger } from '../util/log.js';
import type { MemberRecord, Registry } from './registry.js';
import type { ClusterView } from './replication.js';

const VIEW_REFRESH_MS = 2_000;
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
  private timer: NodeJS.Timeout | undefined;
  private agreedAt = 0;

  private constructor(
    readonly nodeId: string,
    readonly nodeNum: number,
    readonly replicationFactor: number,
    private readonly registry: Registry,
    private readonly log: Logger,
  ) {}

  static async open(registry: Registry, nodeId: string, log: Logger): Promise<EtcdClusterView> {
    const cluster = await registry.cluster();
    if (cluster === undefined) throw Unavailable('the cluster record is not in etcd');
    const nodeNum = await nodeNumOf(registry, nodeId);
    const view = new EtcdClusterView(nodeId, nodeNum, cluster.replicationFactor, registry, log);
    await view.refresh();
    view.timer = setInterval(() => void view.refresh(), VIEW_REFRESH_MS);
    view.timer.unref();
    return view;
  }

  members(): ReadonlyMap<string, MemberRecord> {
    return this.current;
  }

  quorate(): boolean {
    return Date.now() - this.agreedAt < QUORUM_STALE_MS;
  }

  private async refresh(): Promise<void> {
    try {
      const members = await this.registry.members();
      this.agreedAt = Date.now();
      this.current = new Map(
        members
          .map((entry) => entry.record)
          .filter((record) => STORAGE_STATES.has(record.state))
          .map((record) => [record.id, record]),
      );
    } catch (error) {
      this.log.warn({ err: error }, 'membership not re-read; placement uses the last one');
    }
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
