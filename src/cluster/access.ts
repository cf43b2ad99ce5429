// The admin process's way into the cluster: it reads this node's state (node-state.ts) on each
// cluster request and keeps one etcd connection while that state stays the same, so a node that
// joins, is drained (its etcd endpoints change) or removed is followed without a restart.

import { clusterPaths, readNodeState, readClusterSecret } from './node-state.js';
import { openMembership, type Membership } from './membership.js';
import type { Registry } from './registry.js';
import { Conflict } from '../util/errors.js';

export class ClusterAccess {
  private cached: { key: string; membership: Membership; registry: Registry } | undefined;
  private opening: Promise<Membership> | undefined;

  constructor(
    private readonly dataDir: string,
    private readonly replicationFactor: number,
  ) {}

  async membership(): Promise<Membership> {
    const paths = clusterPaths(this.dataDir);
    const node = await readNodeState(paths);
    if (node === undefined)
      throw Conflict('this node waits to be joined: join it from a member of the cluster');
    const key = JSON.stringify(node);
    if (this.cached?.key === key) return this.cached.membership;
    this.opening ??= (async () => {
      const secret = await readClusterSecret(paths);
      const opened = await openMembership({
        node,
        secret,
        replicationFactor: this.replicationFactor,
      });
      this.cached?.registry.close();
      this.cached = { key, ...opened };
      return opened.membership;
    })().finally(() => (this.opening = undefined));
    return this.opening;
  }

  /** The etcd records of this node's cluster (opened with the membership). */
  async registry(): Promise<Registry> {
    await this.membership();
    const cached = this.cached;
    if (cached === undefined) throw Conflict('this node is not a member of a cluster');
    return cached.registry;
  }

  close(): void {
    this.cached?.registry.close();
    this.cached = undefined;
  }
}
