// Per-partition leadership and its fencing epoch (docs/cluster.md §8), in etcd under
// `partitions/<3-digit p>`: `{nodeId, epoch, since}`. The leader of a partition is the first of
// its replicas in the layout's order (layout.ts) whose liveness lease is alive; each member's
// view (cluster-view.ts) looks every poll for the partitions it should lead and does not, and
// takes them with one transaction per batch that compares each record's mod revision (or its
// absence) and writes the next epoch. So an epoch grows by one at every change of leader, two
// members never take one partition with the same epoch, and a member that lost a race simply
// reads the winner's record at its next poll.
//
// What the epoch fences: every replicated write carries the partition and the epoch its
// coordinator knows (replication.ts); a replica refuses one whose epoch is below the highest it
// has seen for that partition (`stale_epoch`). A leader that was paused or cut off past its
// lease, while another member took its partitions, can no longer have a write taken by a replica
// that has seen the new epoch; it must first read etcd (which a minority side cannot) and send
// again under the new epoch. The records are not under a lease: an epoch must outlive its leader.

import type { Etcd3 } from 'etcd3';
import { PARTITIONS } from './layout.js';

export const LEADERS_PREFIX = 'partitions/';
/** Partitions taken in one transaction (etcd's default --max-txn-ops is 128: 2 ops each). */
const TAKE_BATCH = 32;

export interface LeaderRecord {
  readonly nodeId: string;
  readonly epoch: number;
  /** The layout version its taker placed by: a member with an older one takes nothing from it. */
  readonly layout: number;
  readonly since: string;
}

export interface HeldLeader extends LeaderRecord {
  readonly modRevision: string;
}

export function leaderKey(partition: number): string {
  return `${LEADERS_PREFIX}${String(partition).padStart(3, '0')}`;
}

/** Every partition's leader record, by partition (absent: never led). */
export async function readLeaders(
  client: Etcd3,
  key: (name: string) => string,
): Promise<Map<number, HeldLeader>> {
  const prefix = key(LEADERS_PREFIX);
  const response = await client.getAll().prefix(prefix).exec();
  const leaders = new Map<number, HeldLeader>();
  for (const kv of response.kvs) {
    const partition = Number(kv.key.toString().slice(prefix.length));
    if (!Number.isInteger(partition) || partition < 0 || partition >= PARTITIONS) continue;
    const record = JSON.parse(kv.value.toString()) as LeaderRecord;
    leaders.set(partition, { ...record, modRevision: kv.mod_revision });
  }
  return leaders;
}

/**
 * The partitions `nodeId` should lead and does not: it is the first live replica, and the
 * record names no one, a member that is not live, one that is no replica any more, or a replica
 * after it in the order (a preferred leader back from an outage takes its partitions back). A
 * record taken under a newer layout than `layout` is left alone: this member's table is stale.
 */
export function partitionsToTake(
  nodeId: string,
  layout: number,
  table: ReadonlyArray<readonly string[]>,
  live: ReadonlySet<string>,
  leaders: ReadonlyMap<number, LeaderRecord>,
): number[] {
  const take: number[] = [];
  table.forEach((replicas, partition) => {
    if (replicas.find((id) => live.has(id)) !== nodeId) return;
    const held = leaders.get(partition);
    if (held !== undefined && held.layout > layout) return;
    if (held === undefined || held.nodeId === nodeId) {
      if (held === undefined) take.push(partition);
      return;
    }
    const rank = replicas.indexOf(held.nodeId);
    if (!live.has(held.nodeId) || rank < 0 || rank > replicas.indexOf(nodeId)) take.push(partition);
  });
  return take;
}

/** Takes `partitions` for `nodeId`, each at the next epoch; answers those it took. */
export async function takeLeaderships(
  client: Etcd3,
  key: (name: string) => string,
  taker: { nodeId: string; layout: number },
  partitions: readonly number[],
  held: ReadonlyMap<number, HeldLeader>,
): Promise<Map<number, LeaderRecord>> {
  const { nodeId, layout } = taker;
  const taken = new Map<number, LeaderRecord>();
  for (let start = 0; start < partitions.length; start += TAKE_BATCH) {
    const batch = partitions.slice(start, start + TAKE_BATCH);
    const since = new Date().toISOString();
    const records = batch.map((partition) => ({
      partition,
      record: { nodeId, epoch: (held.get(partition)?.epoch ?? 0) + 1, layout, since },
    }));
    const [first, ...rest] = records.map(({ partition }) => {
      const current = held.get(partition);
      return { name: key(leaderKey(partition)), current };
    });
    if (first === undefined) continue;
    let txn =
      first.current === undefined
        ? client.if(first.name, 'Version', '==', 0)
        : client.if(first.name, 'Mod', '==', first.current.modRevision);
    for (const entry of rest)
      txn =
        entry.current === undefined
          ? txn.and(entry.name, 'Version', '==', 0)
          : txn.and(entry.name, 'Mod', '==', entry.current.modRevision);
    const puts = records.map(({ partition, record }) =>
      client.put(key(leaderKey(partition))).value(JSON.stringify(record)),
    );
    if ((await txn.then(...puts).commit()).succeeded)
      for (const { partition, record } of records) taken.set(partition, record);
  }
  return taken;
}
